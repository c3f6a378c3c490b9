// Resuming a checkpoint on another number of ranks: what ps/reshard.h does for the shards and
// residuals, plus the per-rank data positions and the counters that are per rank.
//
// Data positions: every new rank restarts from the earliest old rank's position (smallest epoch,
// then batch offset). Batches are numbered over all ranks, so nothing of the epoch is skipped;
// the few batches (fewer than the old rank count) that other old ranks had already taken past
// that point are seen a second time.
#pragma once

#include <string>

#include "trainer/checkpoint.h"

namespace tern::trainer {

// Rewrites c's per-rank parts (shard_states, worker_states, data_states) for new_ranks ranks;
// kind is distributed.strategy. Logs what it did. No-op when the rank counts agree.
void ReshardCheckpoint(const std::string& kind, int new_ranks, Checkpoint* c);

}  // namespace tern::trainer
