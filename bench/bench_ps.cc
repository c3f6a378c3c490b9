// bench-ps: how close the parameter server comes to the network. Under `mpirun -np N`, each
// rank runs async push+pull rounds (dense, SGD, no overlap) over a flat buffer of --params
// floats, then moves the same bytes with plain MPI_Send/MPI_Recv between the same pairs.
// Prints one JSON line (rank 0): payload bytes each rank sends+receives per second for both,
// and their ratio (1.0 = the parameter server costs nothing beyond the transfer).
#include <gflags/gflags.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

#include "comm/mpi_communicator.h"
#include "common/error.h"
#include "common/thread_pool.h"
#include "common/timer.h"
#include "ps/async_sgd.h"
#include "tensor/threads.h"

DEFINE_int64(params, 8 << 20, "floats in the flat parameter buffer");
DEFINE_int32(steps, 20, "timed push+pull rounds (after 2 warm-up rounds)");
DEFINE_int32(threads, 0, "threads per rank for the optimizer step (0: the host's cores / ranks)");

namespace tern {
namespace {

// Bytes one rank sends + receives in one PS round: its gradient slices for the other shards
// go out, and the same shards come back.
double RoundBytes(const ps::ShardMap& map, int rank) {
  double bytes = 0;
  for (int s = 0; s < map.num_shards(); ++s) {
    if (s != rank) bytes += 2.0 * map.range(s).size() * sizeof(float);
  }
  return bytes;
}

double BenchPs(comm::Communicator& comm, const ps::ShardMap& map) {
  config::OptimConfig optim;
  optim.set_optimizer("sgd");
  ps::StrategyOptions options;
  options.overlap = false;
  ps::AsyncSgd strategy(options, optim, &comm, map.num_params());
  std::vector<float> params(map.num_params(), 1.f), grads(map.num_params(), 1e-6f);
  Tensor p(params.data(), Shape{map.num_params()}), g(grads.data(), Shape{map.num_params()});
  strategy.Init(p);
  ps::StepInfo info;
  info.options.learning_rate = 1e-3f;
  info.options.beta1 = 0.f;
  for (int t = 1; t <= 2; ++t) {
    info.update = t;
    strategy.Step(g, p, info);
  }
  comm.Barrier();
  Timer timer;
  for (int t = 0; t < FLAGS_steps; ++t) {
    info.update = 3 + t;
    strategy.Step(g, p, info);
  }
  const double seconds = timer.Seconds();
  strategy.Finish();
  return RoundBytes(map, comm.rank()) * FLAGS_steps / seconds;
}

double BenchMpi(const ps::ShardMap& map, int rank, int size) {
  // The same pattern with raw MPI: to each peer send its shard's slice, receive one back.
  std::vector<float> out(map.num_params(), 1.f), in(map.num_params());
  std::vector<MPI_Request> requests;
  auto round = [&] {
    requests.clear();
    for (int s = 0; s < size; ++s) {
      if (s == rank) continue;
      const ps::ShardRange& theirs = map.range(s);
      const ps::ShardRange& mine = map.range(rank);
      requests.emplace_back();
      MPI_Irecv(in.data() + theirs.begin, static_cast<int>(mine.size()), MPI_FLOAT, s, 0,
                MPI_COMM_WORLD, &requests.back());
      requests.emplace_back();
      MPI_Isend(out.data() + theirs.begin, static_cast<int>(theirs.size()), MPI_FLOAT, s, 0,
                MPI_COMM_WORLD, &requests.back());
    }
    MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  };
  for (int t = 0; t < 2; ++t) round(), round();
  MPI_Barrier(MPI_COMM_WORLD);
  Timer timer;
  // A PS round is a push then a reply: two exchanges of a shard's bytes.
  for (int t = 0; t < FLAGS_steps; ++t) round(), round();
  const double seconds = timer.Seconds();
  return RoundBytes(map, rank) * FLAGS_steps / seconds;
}

int Run(int* argc, char*** argv) {
  auto comm = comm::MakeMpiCommunicator(argc, argv);
  if (FLAGS_params < 16 || FLAGS_steps < 1) Fail("--params must be >= 16 and --steps >= 1");
  const ps::ShardMap map(FLAGS_params, comm->size());
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  SetNumThreads(FLAGS_threads > 0 ? FLAGS_threads : std::max(1, cores / comm->size()));
  const double ps_rate = BenchPs(*comm, map);
  const double mpi_rate = BenchMpi(map, comm->rank(), comm->size());
  // The slowest rank sets the pace: report the minimum over ranks.
  double rates[2] = {ps_rate, mpi_rate}, mins[2];
  MPI_Allreduce(rates, mins, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  if (comm->rank() == 0) {
    std::printf(
        "{\"bench\":\"ps\",\"ranks\":%d,\"params\":%lld,\"steps\":%d,"
        "\"ps_bytes_per_s\":%.4g,\"mpi_bytes_per_s\":%.4g,\"ratio\":%.4f}\n",
        comm->size(), static_cast<long long>(FLAGS_params), FLAGS_steps, mins[0], mins[1],
        mins[0] / mins[1]);
  }
  comm.reset();
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tern::RunMain("bench-ps", [&] { return tern::Run(&argc, &argv); });
}
