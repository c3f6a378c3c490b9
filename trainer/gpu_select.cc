#include "trainer/gpu_select.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <string>

#include "tensor/allocator.h"

namespace tern::trainer {
namespace {

constexpr int kTagGpuIdentity = 9103;  // below comm::kMaxUserTag, apart from ps/'s

// This process's rank among the job's processes on its host, from the launcher's environment
// (Open MPI, MPICH/Hydra, Slurm); the job rank where none says.
int LocalRank(int rank) {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0') return std::atoi(v);
  }
  return rank;
}

}  // namespace

GpuChoice SelectGpuForRank(comm::Communicator* comm) {
  const int rank = comm->rank(), ranks = comm->size();
  const int count = CudaDeviceCount();
  const int local = LocalRank(rank);
  GpuChoice choice;
  choice.device = local % count;
  SelectCudaDevice(choice.device);
  if (ranks == 1) return choice;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::string mine = std::string(host) + " " + CudaBusId(choice.device);
  LOG(INFO) << "[training] rank " << rank << " (local rank " << local << ") uses GPU "
            << choice.device << " of " << count << " (" << mine << ")";
  char shared = 0;
  if (rank == 0) {
    std::map<std::string, int> owner = {{mine, 0}};
    std::string theirs;
    for (int r = 1; r < ranks; ++r) {
      comm->Recv(r, kTagGpuIdentity, &theirs);
      auto [it, fresh] = owner.emplace(theirs, r);
      if (!fresh) {
        shared = 1;
        LOG(WARNING) << "[training] ranks " << it->second << " and " << r << " share the GPU "
                     << theirs << ": give each rank its own (launch/tern-local-rank-env)";
      }
    }
  } else {
    comm->Send(0, kTagGpuIdentity, mine);
  }
  comm->Broadcast(&shared, 1, 0);
  choice.shared = shared != 0;
  return choice;
}

}  // namespace tern::trainer
