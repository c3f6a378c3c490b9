// Collectives on CUDA buffers through NCCL (synchronous SGD on GPUs). Point-to-point messages,
// Barrier and Broadcast go through the host communicator (MPI), which also hands the NCCL
// unique id from rank 0 to the others. The collectives queue on the tensor kernels' stream and
// do not wait (see communicator.h).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace tern::comm {

// Whether this build has NCCL (TERN_CUDA found nvcc and nccl.h) and the GPU is not emulated.
bool NcclAvailable();

// `host` must outlive the result; one rank per CUDA device. Throws tern::Error in a build
// without NCCL or when NCCL cannot initialize.
std::unique_ptr<Communicator> MakeNcclCommunicator(Communicator* host, int cuda_device);

}  // namespace tern::comm
