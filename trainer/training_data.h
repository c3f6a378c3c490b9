// The training side of data/: the vocabulary (trained on first use, then reused), the batch
// stream for this rank, its saved position, and the conversion of a batch to tensors.
#pragma once

#include <memory>
#include <string>

#include "configs/tern.pb.h"
#include "data/batcher.h"
#include "data/prefetcher.h"
#include "data/vocab.h"
#include "models/model.h"
#include "tensor/arena.h"
#include "tensor/staging.h"
#include "tensor/tensor.h"

namespace tern::trainer {

class TrainingData {
 public:
  TrainingData(const config::TrainConfig& config, const std::string& model_dir, int rank,
               int world_size);
  ~TrainingData();

  const data::Vocab& vocab() const { return *vocab_; }
  // Starts the prefetcher at `state` (a saved position; empty = the beginning).
  void Start(const std::string& state);
  // The next batch of this rank; *epoch is the 0-based epoch of the position after it.
  bool Next(data::Batch* batch, int64_t* epoch);
  // The position after the last batch Next returned.
  std::string SaveState() const;

 private:
  int prefetch_;
  std::unique_ptr<data::Vocab> vocab_;
  std::unique_ptr<data::Batcher> batcher_;  // until Start hands it to the prefetcher
  std::unique_ptr<data::Prefetcher> prefetcher_;
};

// The vocabulary named by data.vocab, trained from the training corpus when the file does not
// exist yet (written there, or to model_dir/vocab.spm when data.vocab is empty).
data::Vocab LoadOrTrainVocab(const config::TrainConfig& config, const std::string& model_dir);

// Copies a batch into tensors from the arena (waiting for the copy: for validation).
models::BatchTensors ToTensors(const data::Batch& batch, Arena* arena);

// The training loop's way onto its device: a batch's four arrays in one block of the arena. On a
// GPU they are packed into one of two page-locked staging buffers, used in turn, and copied
// without waiting for the GPU, so the step queues behind the previous one instead of draining
// it; a fence per buffer holds its reuse until the GPU has read it. The CPU takes the same path
// through ordinary memory.
class BatchUploader {
 public:
  models::BatchTensors Upload(const data::Batch& batch, Arena* arena);

 private:
  StagingRing staging_{2};
};

}  // namespace tern::trainer
