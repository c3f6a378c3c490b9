// The SentencePiece shim module: the only code in Tern that calls the SentencePiece library.
// See spm_shim.h for why it is a separately loaded module. Nothing here throws across the C
// boundary.
#include "data/spm_shim.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

// Exported by libsentencepiece but declared in no installed header; quiets the trainer's log.
namespace sentencepiece::logging {
void SetMinLogLevel(int v);
}  // namespace sentencepiece::logging

namespace {

char* CopyOut(const std::string& s, size_t* len) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) return nullptr;
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  if (len != nullptr) *len = s.size();
  return out;
}

void SetError(char** error, const std::string& message) {
  if (error != nullptr) *error = CopyOut(message, nullptr);
}

// Feeds '\n'-separated sentences from one buffer to the trainer without copying the whole set.
class BufferIterator : public sentencepiece::SentenceIterator {
 public:
  BufferIterator(const char* data, size_t len) : data_(data), len_(len) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    if (pos_ >= len_) {
      done_ = true;
      return;
    }
    const char* begin = data_ + pos_;
    const void* nl = std::memchr(begin, '\n', len_ - pos_);
    size_t end = nl ? static_cast<size_t>(static_cast<const char*>(nl) - data_) : len_;
    value_.assign(begin, data_ + end);
    pos_ = end + 1;
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const char* data_;
  size_t len_;
  size_t pos_ = 0;
  bool done_ = false;
  std::string value_;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int tern_spm_train(const char* options, size_t options_len,
                                                          const char* sentences,
                                                          size_t sentences_len, char** model,
                                                          size_t* model_len, char** error) {
  std::unordered_map<std::string, std::string> kwargs;
  std::string opts(options, options_len);
  size_t pos = 0;
  while (pos < opts.size()) {
    size_t end = opts.find('\n', pos);
    if (end == std::string::npos) end = opts.size();
    std::string line = opts.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    kwargs[line.substr(0, eq)] = line.substr(eq + 1);
  }
  auto seed = kwargs.find("random_seed");
  if (seed != kwargs.end()) {
    sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(std::stoul(seed->second)));
    kwargs.erase(seed);  // a process setting, not a TrainerSpec field
  }
  auto level = kwargs.find("minloglevel");
  if (level != kwargs.end()) {
    sentencepiece::logging::SetMinLogLevel(std::stoi(level->second));
    kwargs.erase(level);
  }
  BufferIterator it(sentences, sentences_len);
  std::string serialized;
  sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(kwargs, &it, &serialized);
  if (!status.ok()) {
    SetError(error, status.ToString());
    return 1;
  }
  *model = CopyOut(serialized, model_len);
  return 0;
}

__attribute__((visibility("default"))) void* tern_spm_load(const char* model, size_t model_len,
                                                           char** error) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status =
      processor->LoadFromSerializedProto(std::string_view(model, model_len));
  if (!status.ok()) {
    SetError(error, status.ToString());
    return nullptr;
  }
  return processor.release();
}

__attribute__((visibility("default"))) void tern_spm_unload(void* handle) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

__attribute__((visibility("default"))) int tern_spm_piece_size(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

__attribute__((visibility("default"))) int tern_spm_encode(void* handle, const char* text,
                                                           size_t len, int32_t** ids,
                                                           size_t* num_ids, char** error) {
  std::vector<int> out;
  sentencepiece::util::Status status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Encode(
          std::string_view(text, len), &out);
  if (!status.ok()) {
    SetError(error, status.ToString());
    return 1;
  }
  *num_ids = out.size();
  *ids = static_cast<int32_t*>(std::malloc(sizeof(int32_t) * (out.size() + 1)));
  for (size_t i = 0; i < out.size(); ++i) (*ids)[i] = out[i];
  return 0;
}

__attribute__((visibility("default"))) int tern_spm_decode(void* handle, const int32_t* ids,
                                                           size_t num_ids, char** text, size_t* len,
                                                           char** error) {
  std::vector<int> in(ids, ids + num_ids);
  std::string out;
  sentencepiece::util::Status status =
      static_cast<sentencepiece::SentencePieceProcessor*>(handle)->Decode(in, &out);
  if (!status.ok()) {
    SetError(error, status.ToString());
    return 1;
  }
  *text = CopyOut(out, len);
  return 0;
}

__attribute__((visibility("default"))) int tern_spm_id_to_piece(void* handle, int32_t id,
                                                                char** piece, size_t* len) {
  auto* processor = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
  if (id < 0 || id >= processor->GetPieceSize()) return 1;
  *piece = CopyOut(processor->IdToPiece(id), len);
  return 0;
}

__attribute__((visibility("default"))) void tern_spm_free(void* p) { std::free(p); }

}  // extern "C"
