#include "trainer/training_data.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/file_io.h"
#include "data/data_options.h"
#include "tensor/allocator.h"

namespace tern::trainer {

data::Vocab LoadOrTrainVocab(const config::TrainConfig& config, const std::string& model_dir) {
  config::DataConfig data = config.data();
  if (data.vocab().empty()) data.set_vocab(model_dir + "/vocab.spm");
  if (!FileExists(data.vocab()))
    LOG(INFO) << "[data] training a " << data.vocab_size() << "-piece SentencePiece vocabulary on "
              << data.train_src() << " + " << data.train_tgt() << " -> " << data.vocab();
  return data::LoadOrTrainVocab(data, config.training().seed());
}

TrainingData::TrainingData(const config::TrainConfig& config, const std::string& model_dir,
                           int rank, int world_size)
    : prefetch_(std::max(1, config.data().prefetch())) {
  vocab_ = std::make_unique<data::Vocab>(LoadOrTrainVocab(config, model_dir));
  data::BatcherOptions options =
      data::BatcherOptionsFromConfig(config.data(), config.training().seed(), rank, world_size);
  batcher_ = std::make_unique<data::Batcher>(options, *vocab_);
  LOG(INFO) << "[data] " << config.data().train_src() << " / " << config.data().train_tgt() << ": "
            << batcher_->corpus_stats().Summary();
}

TrainingData::~TrainingData() = default;

void TrainingData::Start(const std::string& state) {
  CHECK(batcher_ != nullptr) << "TrainingData::Start called twice";
  if (!state.empty()) batcher_->Restore(data::BatcherState::Parse(state));
  prefetcher_ = std::make_unique<data::Prefetcher>(std::move(batcher_), prefetch_);
}

bool TrainingData::Next(data::Batch* batch, int64_t* epoch) {
  if (!prefetcher_->Next(batch)) return false;
  *epoch = prefetcher_->state().epoch;
  return true;
}

std::string TrainingData::SaveState() const { return prefetcher_->state().Serialize(); }

namespace {

// Each row's ones in the batch's source mask, where every row is a run of ones then zeros; empty
// otherwise (then no layer gets lengths).
std::vector<int32_t> SourceLengths(const data::Batch& b) {
  std::vector<int32_t> lengths(b.batch_size);
  for (int r = 0; r < b.batch_size; ++r) {
    const float* row = b.src_mask.data() + static_cast<int64_t>(r) * b.src_len;
    int32_t n = 0;
    while (n < b.src_len && row[n] != 0.f) ++n;
    for (int t = n; t < b.src_len; ++t)
      if (row[t] != 0.f) return {};
    lengths[r] = n;
  }
  return lengths;
}

}  // namespace

models::BatchTensors ToTensors(const data::Batch& b, Arena* arena) {
  models::BatchTensors t;
  t.src = arena->Alloc({b.batch_size, b.src_len}, DType::kInt32);
  t.src_mask = arena->Alloc({b.batch_size, b.src_len});
  t.tgt_in = arena->Alloc({b.batch_size, b.tgt_len}, DType::kInt32);
  t.tgt_out = arena->Alloc({b.batch_size, b.tgt_len}, DType::kInt32);
  // Onto the arena's device (a plain copy on the CPU).
  const Device d = arena->device();
  CopyBytes(t.src.raw(), d, b.src.data(), Device::kCpu, t.src.bytes());
  CopyBytes(t.src_mask.raw(), d, b.src_mask.data(), Device::kCpu, t.src_mask.bytes());
  CopyBytes(t.tgt_in.raw(), d, b.tgt_in.data(), Device::kCpu, t.tgt_in.bytes());
  CopyBytes(t.tgt_out.raw(), d, b.tgt_out.data(), Device::kCpu, t.tgt_out.bytes());
  t.src_lengths = SourceLengths(b);
  return t;
}

models::BatchTensors BatchUploader::Upload(const data::Batch& b, Arena* arena) {
  // The same path on the CPU (plain memory, plain copies, no-op fences), so that every CPU
  // training test runs it. int32 and float32 alike: one block of 4-byte words, (src | src_mask |
  // tgt_in | tgt_out).
  const int64_t s = int64_t{b.batch_size} * b.src_len, t = int64_t{b.batch_size} * b.tgt_len;
  const int64_t words = 2 * s + 2 * t;
  int32_t* host = staging_.Next(words);  // waits until the GPU has read it, two batches ago
  std::memcpy(host, b.src.data(), s * sizeof(int32_t));
  std::memcpy(host + s, b.src_mask.data(), s * sizeof(float));
  std::memcpy(host + 2 * s, b.tgt_in.data(), t * sizeof(int32_t));
  std::memcpy(host + 2 * s + t, b.tgt_out.data(), t * sizeof(int32_t));
  const Device d = arena->device();
  Tensor block = arena->Alloc({words}, DType::kInt32);
  staging_.Send(block.raw(), d, words);
  int32_t* dev = block.i32();
  models::BatchTensors out;
  out.src = Tensor(dev, {b.batch_size, b.src_len}, DType::kInt32, d);
  out.src_mask = Tensor(dev + s, {b.batch_size, b.src_len}, DType::kFloat32, d);
  out.tgt_in = Tensor(dev + 2 * s, {b.batch_size, b.tgt_len}, DType::kInt32, d);
  out.tgt_out = Tensor(dev + 2 * s + t, {b.batch_size, b.tgt_len}, DType::kInt32, d);
  out.src_lengths = SourceLengths(b);
  return out;
}

}  // namespace tern::trainer
