// Marian's SentencePiece vocabularies and Tern's hold the same pieces with other special ids:
// Marian has eos "</s>" 0, unk "<unk>" 1 and no bos or pad (its decoder starts from a zero vector);
// Tern has pad 0, unk 1, bos 2, eos 3 (data/vocab.h) and starts from the bos embedding. This file
// rebuilds a Marian vocabulary with Tern's ids and moves an imported model's embedding rows to
// them, working on SentencePiece's ModelProto wire format directly (no SentencePiece needed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inference/marian/model.h"

namespace tern::inference {

// SentencePiece.Type values of sentencepiece_model.proto.
enum class SpmPieceType : int { kNormal = 1, kUnknown = 2, kControl = 3 };

struct SpmPiece {
  std::string piece;
  float score = 0;
  int type = static_cast<int>(SpmPieceType::kNormal);
};

// The pieces of a serialized SentencePiece ModelProto, in id order. tern::Error naming `source`
// when the bytes are not one.
std::vector<SpmPiece> SpmPieces(std::string_view model, const std::string& source);

// `model` with its pieces replaced by `pieces`, its trainer spec's unk/bos/eos/pad ids set to
// where "<unk>", "<s>", "</s>" and "<pad>" now are (-1 when absent), and its self-test data
// dropped (it names the old ids). Everything else is kept byte for byte.
std::string WithSpmPieces(std::string_view model, const std::vector<SpmPiece>& pieces,
                          const std::string& source);

struct MarianVocabRemap {
  std::string tern_vocab;          // serialized SentencePiece model with Tern's special ids
  std::vector<int32_t> marian_id;  // per Tern id, the Marian id of the same piece; -1: pad, bos
};

// Tern's form of a Marian SentencePiece vocabulary: pad, unk, bos, eos first, then Marian's other
// pieces in their order. tern::Error when it lacks "</s>" or "<unk>".
MarianVocabRemap TernVocabFromMarian(std::string_view marian_vocab, const std::string& source);

// Moves the embedding rows and output biases of a model imported from Marian to Tern's ids. The
// pad and bos rows are zero (so the decoder starts from Marian's zero vector) and their output
// bias is -1e9 (never chosen; Marian has no such tokens). tern::Error when the model's vocabulary
// size is not the Marian vocabulary's.
void RemapToTernIds(const MarianVocabRemap& remap, const std::string& source, ImportedModel* model);

}  // namespace tern::inference
