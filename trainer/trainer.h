// The training loop: batches in, updates out, with Marian-style progress lines, periodic
// validation, early stopping, atomic checkpoints and exact resume.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "configs/tern.pb.h"
#include "trainer/budget.h"

namespace tern::trainer {

struct TrainerOptions {
  std::string model_dir;
  Budget budget;
  // The job's ranks (MPI under mpirun, or in-process for tests). Every rank is a worker and
  // owns one parameter-server shard (DESIGN.md, "Distributed training protocol").
  comm::Communicator* comm = nullptr;
  // Keep the strategy's parameters in a host copy apart from the graph's, as a GPU run does,
  // on the CPU too: tests the GPU run's host/device traffic where there is no GPU.
  bool host_copy = false;
  // With host_copy: the strategy steps the graph's parameters where they live, as a GPU run
  // does where it can (one rank without tau, dropping or local optimizers: ps::LocalStrategy;
  // sync on several ranks: SyncSgd over the device's collectives, NCCL on GPUs and the job's
  // communicator here). For tests on the CPU.
  bool strategy_on_device = false;
  // SIGTERM and SIGUSR1 (common/stop_signal.h), from the first update on, end training early
  // with a checkpoint, as Slurm's --signal asks of a job whose time runs out. Under mpirun any
  // rank may catch one: the job stops after the same update on every rank (sync), or when rank 0
  // orders it (async). Off for tests that run ranks as threads of one process.
  bool stop_on_signals = false;
};

struct TrainResult {
  int64_t updates = 0;             // done in total (rank 0's, in an async run on several ranks)
  bool stopped_by_signal = false;  // a stop signal ended it early, the state saved
};

// Throws tern::Error naming the first field of a defaulted, config::Validate'd config that
// training would refuse: distributed.* (ps/plan.h), the schedule's optim.* fields, the budget
// (training.after). tern-train meets them at start-up; a sweep checks every cell before any runs.
void CheckConfig(const config::TrainConfig& config);

// Runs training to the budget (or early stopping) and leaves model_dir with the final
// checkpoint and model.tern (rank 0 writes them). Resumes from model_dir's latest checkpoint when
// there is one. Every rank calls it. Rank 0 holds model_dir/.lock (common/dir_lock.h) while it
// runs: a second run into the same directory throws tern::Error naming the first one's pid.
TrainResult Train(const config::TrainConfig& config, const TrainerOptions& options);

}  // namespace tern::trainer
