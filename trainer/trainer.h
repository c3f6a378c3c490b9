// The training loop: batches in, updates out, with Marian-style progress lines, periodic
// validation, early stopping, atomic checkpoints and exact resume.
#pragma once

#include <memory>
#include <string>

#include "configs/tern.pb.h"
#include "trainer/budget.h"

namespace tern::trainer {

struct TrainerOptions {
  std::string model_dir;
  Budget budget;
  int rank = 0;        // this process's rank (0 when not distributed)
  int world_size = 1;  // ranks in the job
};

// Runs training to the budget (or early stopping) and leaves model_dir with the final
// checkpoint and model.tern. Resumes from model_dir's latest checkpoint when there is one.
// Returns the number of updates done in total.
int64_t Train(const config::TrainConfig& config, const TrainerOptions& options);

}  // namespace tern::trainer
