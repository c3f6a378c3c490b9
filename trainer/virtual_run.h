// Training with virtual workers (distributed.virtual_workers N, ps/virtual_cluster.h): N async
// or sync workers in one process, each with its own share of the batches (rank w of N), its own
// schedule and dropout seeds (as rank w's), its own copy of the parameters, against the real
// shards and optimizers, with simulated time. Every gradient is computed for real, one at a
// time; the clock is the simulation's, so a busy machine makes the run slower, not different.
//
// Worker 0 leads as rank 0 does: the budget (updates, simulated time, epochs) is judged on its
// updates, and it validates the global model every valid_freq of its updates. metrics.jsonl gets
// every worker's records with rank = worker and wall_s = simulated seconds. The run ends with one
// checkpoint in the format of an N-rank run (and model.tern); it does not resume (a sweep reruns
// an unfinished virtual cell from the start). A stop signal ends it at worker 0's next step with
// that checkpoint (TrainResult::stopped_by_signal).
#pragma once

#include "configs/tern.pb.h"
#include "trainer/trainer.h"

namespace tern::trainer {

TrainResult TrainVirtual(const config::TrainConfig& config, const TrainerOptions& options);

}  // namespace tern::trainer
