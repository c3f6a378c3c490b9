// tern-train: trains a model from a config. An MPI program from the start: run it directly or
// under `mpirun -np N`; each rank is a worker (and, in distributed training, a shard owner).
//
//   tern-train --config configs/bible-small.pbtxt --model-dir work/bible --after 30m
//              [--set "optim.learning_rate=0.0005;training.threads=2"]
#include <gflags/gflags.h>
#include <mpi.h>
#include <sched.h>

#include "comm/mpi_communicator.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/stop_signal.h"
#include "configs/config_io.h"
#include "tensor/threads.h"
#include "trainer/trainer.h"

DEFINE_string(config, "", "training config (protobuf text, e.g. configs/bible-small.pbtxt)");
DEFINE_string(model_dir, "", "directory for checkpoints, logs and the exported model");
DEFINE_string(after, "",
              "training budget: 30m, 2h, 2000u (updates), 5e (epochs), judged by rank 0 in an "
              "async run on several ranks (the others follow); overrides training.after");
DEFINE_string(set, "", "config overrides, ';'-separated field.path=value pairs");
DEFINE_bool(host_copy, false,
            "for tests: keep the strategy's parameters in a host copy apart from the graph's, as "
            "a GPU run does, on the CPU too");
DEFINE_bool(strategy_on_device, false,
            "for tests, with --host-copy: the strategy steps the graph's parameters where they "
            "live, as a GPU run does (one rank, or sync on several)");

namespace tern {
namespace {

config::TrainConfig LoadConfig() {
  if (FLAGS_config.empty()) Fail("--config is required (e.g. --config configs/bible-small.pbtxt)");
  config::TrainConfig c;
  std::string error;
  if (!config::LoadTrainConfig(FLAGS_config, &c, &error)) Fail(error);
  if (!config::ApplyOverrides(FLAGS_set, &c, &error)) Fail(error);
  if (!FLAGS_after.empty()) c.mutable_training()->set_after(FLAGS_after);
  config::FillDefaults(&c);
  if (!config::Validate(c, &error)) Fail(FLAGS_config, ": ", error);
  return c;
}

// mpirun binds each rank to one core by default; a rank that then runs several compute threads
// gets a fraction of the speed it should, silently. Say so.
void WarnIfBoundToFewerCores(int threads, int rank) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
  const int cores = CPU_COUNT(&set);
  if (cores < threads)
    LOG(WARNING) << "[training] rank " << rank << " runs " << threads
                 << " compute threads but may use only " << cores
                 << " core(s); start mpirun with --bind-to none (or --map-by slot:PE=" << threads
                 << ") or set training.threads=" << cores;
}

int TrainMain(comm::Communicator* comm) {
  if (FLAGS_model_dir.empty()) Fail("--model-dir is required");
  config::TrainConfig c = LoadConfig();
  WarnIfBoundToFewerCores(
      c.training().threads() > 0 ? c.training().threads() : DefaultComputeThreads(), comm->rank());
  trainer::TrainerOptions options;
  options.model_dir = FLAGS_model_dir;
  options.budget = trainer::Budget::Parse(c.training().after());
  options.comm = comm;
  options.host_copy = FLAGS_host_copy;
  options.strategy_on_device = FLAGS_strategy_on_device;
  options.stop_on_signals = true;
  return trainer::Train(c, options).stopped_by_signal ? kExitStoppedBySignal : 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::SetUsageMessage(
      "trains a Tern model: tern-train --config FILE --model-dir DIR\n"
      "SIGTERM or SIGUSR1 (under mpirun: SIGUSR1 to mpirun) saves a checkpoint and exits with 75; "
      "the same command resumes");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  tern::InitLogging(argv[0]);
  std::unique_ptr<tern::comm::Communicator> comm;
  int rc = tern::RunMain("tern-train", [&] {
    comm = tern::comm::MakeMpiCommunicator(&argc, &argv);
    if (comm->size() > 1)
      tern::SetProcessRole(tern::StrCat("rank ", comm->rank(), " of ", comm->size()));
    return tern::TrainMain(comm.get());
  });
  // A failure on one rank brings the others down too, instead of leaving them waiting. (After a
  // stop signal every rank returns the same status, its work done.)
  if (rc != 0 && rc != tern::kExitStoppedBySignal && comm && comm->size() > 1)
    MPI_Abort(MPI_COMM_WORLD, rc);
  comm.reset();
  return rc;
}
