// Re-sharding a checkpoint written by N ranks for a job of M ranks. The flat state is
// reassembled from the old shard map and cut by the new one (ShardMap is a pure function of the
// parameter count and the rank count, so both maps follow from the numbers).
//
// What moves where:
//  - shard states (parameters, optimizer moments; async also a version): joined over the old
//    map, sliced by the new one. Optimizer step counts take the largest old shard's. Versions
//    restart at 0: they count updates under one shard map, and workers start at version 0.
//  - gradient-dropping residuals (async, one full-length residual per worker): summed over the
//    old workers, and each new worker w receives the sum over new shard w's range (zero
//    elsewhere). Nothing held back is lost or doubled: the sum over new workers equals the sum
//    over old ones. The sample counter takes the largest old one.
// Data positions are the trainer's business (trainer/checkpoint_reshard.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern::ps {

// kind: "async" or "sync" (distributed.strategy: the formats differ). states: one per old rank.
std::vector<std::string> ReshardShardStates(const std::string& kind,
                                            const std::vector<std::string>& states,
                                            int64_t num_params, int new_ranks);
// states: SaveWorkerState of each old rank (all empty when nothing was dropped). Gradient-
// dropping residuals are summed and cut along the new shards; local SGD's inner optimizer states
// go to new worker w from old worker w mod the old count.
std::vector<std::string> ReshardWorkerStates(const std::vector<std::string>& states,
                                             int64_t num_params, int new_ranks);

}  // namespace tern::ps
