// How a checkpoint travels between ranks. Rank 0 alone reads and writes the checkpoint files;
// every rank's share of one (its parameter-server shard, its worker state, its data position)
// goes out from rank 0 on resume and comes back to it on save.
#pragma once

#include <optional>
#include <string>

#include "comm/communicator.h"
#include "trainer/checkpoint.h"

namespace tern::trainer {

// One rank's share of a checkpoint.
struct RankShare {
  std::string shard;   // its parameter-server shard (parameters, version, optimizer state)
  std::string worker;  // its worker state (gradient-dropping residual)
  std::string data;    // its data position
};

// Resume: rank 0 passes the loaded checkpoint (already re-cut for this job's rank count) and
// sends every other rank its share and the training state; the others pass null and receive
// them. Returns this rank's share; `state` becomes the checkpoint's on every rank.
RankShare HandOutCheckpoint(comm::Communicator* comm, const Checkpoint* loaded,
                            TrainingState* state);

// Save: every rank passes its share; rank 0 gets a checkpoint holding every rank's (the rest of
// it for the caller to fill), the others nullopt.
std::optional<Checkpoint> GatherCheckpoint(comm::Communicator* comm, RankShare mine);

}  // namespace tern::trainer
