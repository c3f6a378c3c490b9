#include "inference/marian/vocab.h"

#include <cstring>

#include "common/error.h"

namespace tern::inference {
namespace {

// Field numbers of sentencepiece_model.proto.
constexpr uint32_t kPiecesField = 1, kTrainerSpecField = 2, kSelfTestField = 4;
constexpr uint32_t kPieceText = 1, kPieceScore = 2, kPieceType = 3;
constexpr uint32_t kUnkIdField = 40, kBosIdField = 41, kEosIdField = 42, kPadIdField = 43;
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;
constexpr float kNeverChosenBias = -1e9f;

struct Field {
  uint32_t number = 0;
  int wire = 0;
  std::string_view encoded;  // key and value, as in the message
  std::string_view payload;  // kBytes: the bytes; kFixed32: the 4 bytes
  uint64_t varint = 0;
};

// The fields of one protobuf message, in order; tern::Error naming `source` when malformed.
std::vector<Field> ParseFields(std::string_view msg, const std::string& source) {
  auto fail = [&]() {
    Fail(source, ": not a SentencePiece model (malformed protobuf); give the .spm file");
  };
  std::vector<Field> fields;
  size_t pos = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= msg.size()) fail();
      const uint8_t b = static_cast<uint8_t>(msg[pos++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail();
    return v;
  };
  while (pos < msg.size()) {
    const size_t start = pos;
    const uint64_t key = varint();
    Field f;
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    size_t n = 0;
    if (f.wire == kVarint) {
      f.varint = varint();
    } else if (f.wire == kFixed64 || f.wire == kFixed32) {
      n = f.wire == kFixed64 ? 8 : 4;
    } else if (f.wire == kBytes) {
      n = varint();
    } else {
      fail();
    }
    if (n > msg.size() - pos) fail();
    f.payload = msg.substr(pos, n);
    pos += n;
    f.encoded = msg.substr(start, pos - start);
    fields.push_back(f);
  }
  return fields;
}

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutBytes(std::string* out, uint32_t field, std::string_view bytes) {
  PutVarint(out, (field << 3) | kBytes);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

void PutInt32(std::string* out, uint32_t field, int32_t v) {
  PutVarint(out, (field << 3) | kVarint);
  PutVarint(out, static_cast<uint64_t>(static_cast<int64_t>(v)));  // negative: 10 bytes
}

int32_t IdOf(const std::vector<SpmPiece>& pieces, const std::string& piece) {
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].piece == piece) return static_cast<int32_t>(i);
  return -1;
}

}  // namespace

std::vector<SpmPiece> SpmPieces(std::string_view model, const std::string& source) {
  std::vector<SpmPiece> pieces;
  for (const Field& f : ParseFields(model, source)) {
    if (f.number != kPiecesField || f.wire != kBytes) continue;
    SpmPiece p;
    for (const Field& g : ParseFields(f.payload, source)) {
      if (g.number == kPieceText && g.wire == kBytes) p.piece = std::string(g.payload);
      if (g.number == kPieceScore && g.wire == kFixed32) std::memcpy(&p.score, g.payload.data(), 4);
      if (g.number == kPieceType && g.wire == kVarint) p.type = static_cast<int>(g.varint);
    }
    pieces.push_back(std::move(p));
  }
  if (pieces.empty()) Fail(source, ": not a SentencePiece model (no pieces); give the .spm file");
  return pieces;
}

std::string WithSpmPieces(std::string_view model, const std::vector<SpmPiece>& pieces,
                          const std::string& source) {
  std::string out;
  for (const SpmPiece& p : pieces) {
    std::string piece;
    PutBytes(&piece, kPieceText, p.piece);
    PutVarint(&piece, (kPieceScore << 3) | kFixed32);
    piece.append(reinterpret_cast<const char*>(&p.score), 4);
    PutVarint(&piece, (kPieceType << 3) | kVarint);
    PutVarint(&piece, static_cast<uint64_t>(p.type));
    PutBytes(&out, kPiecesField, piece);
  }
  for (const Field& f : ParseFields(model, source)) {
    if (f.number == kPiecesField || f.number == kSelfTestField) continue;
    if (f.number != kTrainerSpecField || f.wire != kBytes) {
      out.append(f.encoded);
      continue;
    }
    // Later values of a scalar field win, so appending the ids overrides the old ones.
    std::string spec(f.payload);
    PutInt32(&spec, kUnkIdField, IdOf(pieces, "<unk>"));
    PutInt32(&spec, kBosIdField, IdOf(pieces, "<s>"));
    PutInt32(&spec, kEosIdField, IdOf(pieces, "</s>"));
    PutInt32(&spec, kPadIdField, IdOf(pieces, "<pad>"));
    PutBytes(&out, kTrainerSpecField, spec);
  }
  return out;
}

MarianVocabRemap TernVocabFromMarian(std::string_view marian_vocab, const std::string& source) {
  const std::vector<SpmPiece> marian = SpmPieces(marian_vocab, source);
  const int32_t eos = IdOf(marian, "</s>"), unk = IdOf(marian, "<unk>");
  if (eos < 0 || unk < 0) {
    Fail(source,
         ": a Marian SentencePiece vocabulary has the pieces </s> and <unk>; this one lacks ",
         eos < 0 ? "</s>" : "<unk>");
  }
  const auto control = static_cast<int>(SpmPieceType::kControl);
  std::vector<SpmPiece> pieces = {{"<pad>", 0.f, control},
                                  marian[unk],
                                  {"<s>", 0.f, control},
                                  {"</s>", marian[eos].score, control}};
  MarianVocabRemap remap;
  remap.marian_id = {-1, unk, -1, eos};
  for (size_t i = 0; i < marian.size(); ++i) {
    const std::string& p = marian[i].piece;
    if (p == "</s>" || p == "<unk>") continue;
    if (p == "<s>" || p == "<pad>") {
      Fail(source, ": this Marian vocabulary has a '", p, "' piece (id ", i, "); Tern cannot tell ",
           "which row is its own");
    }
    pieces.push_back(marian[i]);
    remap.marian_id.push_back(static_cast<int32_t>(i));
  }
  remap.tern_vocab = WithSpmPieces(marian_vocab, pieces, source);
  return remap;
}

void RemapToTernIds(const MarianVocabRemap& remap, const std::string& source,
                    ImportedModel* model) {
  const int64_t marian_size = static_cast<int64_t>(remap.marian_id.size()) - 2;
  if (model->vocab_size != marian_size) {
    Fail(source, ": the model has ", model->vocab_size, " embedding rows, its Marian vocabulary ",
         marian_size, " pieces; give the vocabulary the model was trained with");
  }
  const int64_t rows = static_cast<int64_t>(remap.marian_id.size());
  for (NamedTensor& t : model->tensors) {
    const bool embedding = t.name == "Wemb" || t.name == "encoder_Wemb" || t.name == "decoder_Wemb";
    if (!embedding && t.name != "decoder_ff_logit_out_b") continue;
    const int64_t width = embedding ? t.tensor.dim(1) : 1;
    Tensor moved = embedding ? Tensor::Zeros({rows, width}) : Tensor::Zeros({rows});
    const float* from = t.tensor.f32();
    float* to = moved.f32();
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t m = remap.marian_id[r];
      if (m >= 0) {
        std::memcpy(to + r * width, from + m * width, width * sizeof(float));
      } else if (!embedding) {
        to[r] = kNeverChosenBias;
      }
    }
    t.tensor = moved;
  }
  model->vocab_size = rows;
}

}  // namespace tern::inference
