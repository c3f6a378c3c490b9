// Checkpoints: everything needed to continue training exactly where it stopped.
//
// Layout under the model directory:
//   checkpoint-<update>/   params.bin (flat float32 values), smoothed.bin (their exponential
//                          average, with optim.exponential_smoothing), shard-<r>.bin (rank r's
//                          parameter server shard: its optimizer state), worker-<r>.bin (rank r's
//                          gradient-dropping residual), config.pbtxt, vocab.spm, manifest.txt
//                          (ranks, update, epoch, counters, each rank's data position, schedule
//                          state, parameter count, config hash, the CRC of every other file,
//                          and last its own CRC)
//   checkpoint.latest      the name of the newest complete checkpoint directory
// A checkpoint is written to a temporary directory, fsynced and renamed; only then is
// checkpoint.latest replaced (atomically). A crash at any point leaves the previous checkpoint
// whole and named by checkpoint.latest; the temporary directories such a crash leaves are removed
// after the next save (and by the trainer at start-up).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "configs/config_io.h"
#include "configs/tern.pb.h"
#include "tensor/tensor.h"

namespace tern::trainer {

struct TrainingState {
  int64_t update = 0;
  int64_t epoch = 0;
  int64_t sentences = 0;
  int64_t target_words = 0;
  double best_valid = 0;  // best validation cost so far (0 = none yet)
  int64_t stalls = 0;     // validations without improvement
  int64_t cycle_start = 1;
  double elapsed_seconds = 0;
  // fp16 training: the loss scaler's state (0 = none, as in checkpoints from before it).
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0;

  // Whether a validation cost is a new best: a finite one below best_valid (or the first). NaN
  // never is: it would become the best, and every later cost compare false with it.
  bool Improves(double cross_entropy) const;
};

struct Checkpoint {
  TrainingState state;
  Tensor params;  // (n) float32, host
  // (n) float32, host: the parameters' exponential average (optim.exponential_smoothing), what
  // validation and export use; undefined when smoothing is off.
  Tensor smoothed;
  // One entry per rank: the shard's optimizer state, the worker's state, the data position.
  std::vector<std::string> shard_states, worker_states, data_states;
  std::string config_text;
  config::TrainConfig config;  // config_text, parsed (when loaded)
  std::string vocab_bytes;
  uint64_t config_hash = 0;
};

// Writes a checkpoint for state.update and points checkpoint.latest at it; keeps the newest
// `keep` checkpoints and removes older ones.
void SaveCheckpoint(const std::string& model_dir, const Checkpoint& checkpoint, int keep);

// The newest complete checkpoint, or nullopt when there is none. A damaged or edited one (a bad
// CRC, the manifest's own included; a truncated file; a field out of range; a config whose hash
// is not the manifest's) is a tern::Error naming the file.
std::optional<Checkpoint> LoadLatestCheckpoint(const std::string& model_dir);

// training.precision of the newest checkpoint's config ("" when there is no checkpoint or its
// config cannot be read: LoadLatestCheckpoint says why). A resumed "auto" run takes it.
std::string LatestCheckpointPrecision(const std::string& model_dir);

// Removes the checkpoint-*.tmp.* directories of saves that never finished (a crash, a full disk).
void RemoveUnfinishedCheckpoints(const std::string& model_dir);

// The fields a resumed run changes from the checkpoint's config `saved`; tern::Error, naming the
// field and `where`, when one is a field the checkpoint's state depends on: the model's
// architecture and sizes (every model.* field but the dropouts and max_length),
// optim.optimizer, distributed.strategy.
std::vector<config::FieldChange> CheckResumeConfig(const config::TrainConfig& saved,
                                                   const config::TrainConfig& now,
                                                   const std::string& where);

}  // namespace tern::trainer
