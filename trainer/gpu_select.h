// Which GPU a training rank uses: one per rank, the local rank's, round robin over the GPUs the
// process sees (one, under launch/tern-local-rank-env).
#pragma once

#include "comm/communicator.h"

namespace tern::trainer {

struct GpuChoice {
  int device = 0;       // the CUDA device this rank selected
  bool shared = false;  // some ranks share a GPU (the same answer on every rank)
};

// Selects this rank's GPU before any CUDA tensor exists (the device pool, stream and cuBLAS
// handle belong to the current GPU). Rank 0 then learns from every rank's host name and GPU bus
// id whether two ranks share a GPU, which NCCL refuses, and warns. Every rank calls it.
GpuChoice SelectGpuForRank(comm::Communicator* comm);

}  // namespace tern::trainer
