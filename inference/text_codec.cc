// The only file of inference/ that touches the vocabulary (data/vocab.h): a TextCodec over
// tern::data::Vocab.
#include "inference/text_codec.h"

#include <string>
#include <unordered_map>

#include "data/vocab.h"

namespace tern::inference {
namespace {

class VocabCodec : public TextCodec {
 public:
  explicit VocabCodec(std::string_view serialized)
      : vocab_(data::Vocab::FromSerialized(serialized, "the model's embedded vocabulary")) {}

  std::vector<int32_t> Encode(std::string_view text) const override { return vocab_.Encode(text); }
  std::string Decode(const std::vector<int32_t>& ids) const override { return vocab_.Decode(ids); }

 private:
  data::Vocab vocab_;
};

class PieceCodec : public TextCodec {
 public:
  explicit PieceCodec(std::string_view serialized) {
    const data::Vocab vocab =
        data::Vocab::FromSerialized(serialized, "the model's embedded vocabulary");
    pieces_.reserve(vocab.size());
    for (int32_t id = 0; id < vocab.size(); ++id) {
      pieces_.push_back(vocab.IdToPiece(id));
      ids_.emplace(pieces_.back(), id);
    }
  }

  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (size_t b = 0; b < text.size();) {
      size_t e = text.find(' ', b);
      if (e == std::string_view::npos) e = text.size();
      if (e > b) {
        auto it = ids_.find(std::string(text.substr(b, e - b)));
        ids.push_back(it == ids_.end() ? data::kUnkId : it->second);
      }
      b = e + 1;
    }
    return ids;
  }

  std::string Decode(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (int32_t id : ids) {
      if (id == data::kPadId || id == data::kBosId || id == data::kEosId) continue;
      if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) continue;
      if (!text.empty()) text += ' ';
      text += pieces_[id];
    }
    return text;
  }

 private:
  std::vector<std::string> pieces_;
  std::unordered_map<std::string, int32_t> ids_;
};

}  // namespace

std::unique_ptr<TextCodec> MakeVocabCodec(std::string_view serialized) {
  return std::make_unique<VocabCodec>(serialized);
}

std::unique_ptr<TextCodec> MakePieceCodec(std::string_view serialized) {
  return std::make_unique<PieceCodec>(serialized);
}

}  // namespace tern::inference
