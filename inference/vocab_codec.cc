// The only file of inference/ that touches the vocabulary (data/vocab.h): a TextCodec over
// tern::data::Vocab.
#include <type_traits>
#include <utility>

#include "data/vocab.h"
#include "inference/text_codec.h"
#include "inference/transformer.h"
#include "inference/translator.h"

namespace tern::inference {
namespace {

// FromSerialized may return the vocabulary or a pointer to it.
template <typename T>
const auto& Deref(const T& v) {
  if constexpr (requires { *v; }) {
    return *v;
  } else {
    return v;
  }
}

class VocabCodec : public TextCodec {
 public:
  explicit VocabCodec(std::string_view serialized)
      : vocab_(data::Vocab::FromSerialized(std::string(serialized))) {}

  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> ids = Deref(vocab_).Encode(std::string(text));
    while (!ids.empty() && (ids.back() == kEosId || ids.back() == kBosId)) ids.pop_back();
    return ids;
  }
  std::string Decode(const std::vector<int32_t>& ids) const override {
    return Deref(vocab_).Decode(ids);
  }

 private:
  decltype(data::Vocab::FromSerialized(std::string())) vocab_;
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
