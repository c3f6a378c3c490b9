// NCCL entry points for builds without CUDA/NCCL: say so clearly instead of failing to link.
#include "comm/nccl_communicator.h"
#include "common/error.h"

namespace tern::comm {

bool NcclAvailable() { return false; }

std::unique_ptr<Communicator> MakeNcclCommunicator(Communicator* host, int cuda_device) {
  Fail("this build has no NCCL; rebuild with TERN_CUDA=ON on a machine with CUDA and NCCL");
}

}  // namespace tern::comm
