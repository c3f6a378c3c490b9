// The joint source/target SentencePiece vocabulary: training (unigram, deterministic for a seed),
// loading, encoding and decoding. The serialized model is the whole vocabulary, so it can be
// embedded in checkpoints and exported models and rebuilt with FromSerialized.
//
// SentencePiece itself runs inside a separately loaded shim module (see spm_shim.h for why).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern::data {

// Fixed special ids; models, batching and the runtime rely on them.
inline constexpr int32_t kPadId = 0;
inline constexpr int32_t kUnkId = 1;
inline constexpr int32_t kBosId = 2;
inline constexpr int32_t kEosId = 3;

struct VocabTrainOptions {
  int vocab_size = 8000;
  // Sentences (over all files) the trainer sees; more are sampled down deterministically.
  int64_t max_sentences = 300000;
  // Lines longer than this (bytes) are left out of training.
  int max_sentence_bytes = 4096;
  uint32_t seed = 1234;
  int num_threads = 2;
  std::string model_type = "unigram";
  double character_coverage = 1.0;
  std::string normalization_rule = "nmt_nfkc";
  // Adds 256 byte pieces so unseen characters round-trip instead of becoming <unk>.
  bool byte_fallback = false;
};

class Vocab {
 public:
  // Trains on every line of `files` jointly (plain or gzip; blank and invalid-UTF-8 lines are left
  // out), writes the model to `model_path` atomically and returns it loaded.
  static Vocab Train(const std::vector<std::string>& files, int vocab_size,
                     const std::string& model_path);
  static Vocab Train(const std::vector<std::string>& files, const VocabTrainOptions& options,
                     const std::string& model_path);
  // Trains on sentences already in memory; writes nothing.
  static Vocab TrainFromSentences(const std::vector<std::string>& sentences,
                                  const VocabTrainOptions& options);

  // Throws tern::Error naming the path when it is missing or not a SentencePiece model, or when
  // its special ids differ from kPadId/kUnkId/kBosId/kEosId.
  static Vocab Load(const std::string& path);
  static Vocab FromSerialized(std::string_view bytes, const std::string& what = "vocabulary");

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;
  ~Vocab();

  // Pieces of `text`, without bos/eos. Thread-safe.
  std::vector<int32_t> Encode(std::string_view text) const;
  // Text of `ids`; pad/bos/eos decode to nothing. Thread-safe.
  std::string Decode(std::span<const int32_t> ids) const;
  std::string IdToPiece(int32_t id) const;
  int size() const { return size_; }
  // The model file's bytes.
  const std::string& serialized() const { return serialized_; }

 private:
  Vocab() = default;
  void* handle_ = nullptr;  // the shim's SentencePieceProcessor
  int size_ = 0;
  std::string serialized_;
};

}  // namespace tern::data
