// The only file of inference/ that touches the vocabulary (data/vocab.h): a TextCodec over
// tern::data::Vocab.
#include "inference/text_codec.h"

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

}  // namespace

std::unique_ptr<TextCodec> MakeVocabCodec(std::string_view serialized) {
  return std::make_unique<VocabCodec>(serialized);
}

}  // namespace tern::inference
