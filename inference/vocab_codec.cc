// The only file of inference/ that touches the vocabulary (data/vocab.h): a TextCodec over
// tern::data::Vocab, and Translator::FromModelFile, which needs one.
#include <utility>

#include "data/vocab.h"
#include "inference/text_codec.h"
#include "inference/transformer.h"
#include "inference/translator.h"

namespace tern::inference {
namespace {

static_assert(data::kPadId == kPadId && data::kUnkId == kUnkId && data::kBosId == kBosId &&
                  data::kEosId == kEosId,
              "the runtime and the vocabulary must agree on special ids");

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

std::unique_ptr<Translator> Translator::FromModelFile(const std::string& path,
                                                      const TranslatorOptions& options) {
  std::unique_ptr<ModelFile> file = ModelFile::Open(path);
  std::unique_ptr<TextCodec> codec = MakeVocabCodec(file->vocab());
  return std::make_unique<Translator>(std::move(file), std::move(codec), options);
}

}  // namespace tern::inference
