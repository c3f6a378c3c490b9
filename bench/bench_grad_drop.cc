// bench-grad-drop: bytes a worker sends per update with gradient dropping against dense pushes,
// measured in the same run. Two (--ranks) in-process ranks run async SGD over a flat buffer of
// --params floats; each update pushes a heavy-tailed random gradient (normal values times a
// log-normal per-entry scale, as real gradients are: a few large entries, many tiny ones).
// Prints one JSON line: payload bytes sent per update (pushes and replies, per rank) for dense
// and for --drop_rate, their ratio, and the fraction of entries sent.
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "comm/in_process.h"
#include "common/error.h"
#include "ps/strategy.h"
#include "tensor/threads.h"

DEFINE_int64(params, 1 << 20, "floats in the flat parameter buffer");
DEFINE_int32(ranks, 2, "in-process ranks");
DEFINE_int32(updates, 20, "updates per rank");
DEFINE_double(drop_rate, 0.99, "gradient-dropping rate to compare with dense");

namespace tern {
namespace {

struct Result {
  double push_bytes_per_update = 0, total_bytes_per_update = 0, sent_fraction = 0;
};

Result Measure(float drop_rate) {
  Result result;
  comm::RunInProcess(FLAGS_ranks, [&](comm::Communicator& comm) {
    config::OptimConfig optim;
    optim.set_optimizer("sgd");
    ps::StrategyOptions options;
    options.drop_rate = drop_rate;
    options.overlap = false;
    auto strategy = ps::MakeStrategy("async", options, optim, &comm, FLAGS_params);
    std::vector<float> params(FLAGS_params, 0.f), grads(FLAGS_params);
    Tensor p(params.data(), Shape{FLAGS_params}), g(grads.data(), Shape{FLAGS_params});
    strategy->Init(p);
    std::mt19937 rng(17 + comm.rank());
    std::normal_distribution<float> normal(0.f, 1.f), log_scale(0.f, 2.f);
    ps::StepInfo info;
    info.options.learning_rate = 1e-3f;
    for (int t = 1; t <= FLAGS_updates; ++t) {
      for (float& x : grads) x = normal(rng) * std::exp(log_scale(rng));
      info.update = t;
      strategy->Step(g, p, info);
    }
    strategy->Flush(p, info);
    strategy->Finish();  // joins the reply thread: every reply is counted
    const ps::StrategyStats s = strategy->stats();
    if (comm.rank() == 0) {
      // Replies are dense shards either way: the push is what dropping shrinks. Rank 0's server
      // replied to every other rank's pushes and to its Flush pull.
      const double reply = sizeof(uint64_t) + strategy->shard_map().range(0).size() * 4.0;
      const double reply_bytes = (FLAGS_ranks - 1) * (FLAGS_updates + 1) * reply;
      result.total_bytes_per_update = static_cast<double>(s.bytes_sent) / FLAGS_updates;
      result.push_bytes_per_update = (s.bytes_sent - reply_bytes) / FLAGS_updates;
      result.sent_fraction = static_cast<double>(s.entries_sent) / s.entries_total;
    }
  });
  return result;
}

int Run() {
  if (FLAGS_params < 16 || FLAGS_ranks < 2 || FLAGS_updates < 1 || FLAGS_drop_rate <= 0 ||
      FLAGS_drop_rate >= 1)
    Fail("need --params >= 16, --ranks >= 2, --updates >= 1, 0 < --drop_rate < 1");
  const Result dense = Measure(0.f);
  const Result dropped = Measure(static_cast<float>(FLAGS_drop_rate));
  std::printf(
      "{\"bench\":\"grad_drop\",\"ranks\":%d,\"params\":%lld,\"updates\":%d,\"drop_rate\":%.4g,"
      "\"dense_push_bytes_per_update\":%.6g,\"dropped_push_bytes_per_update\":%.6g,"
      "\"push_ratio\":%.5f,\"dense_total_bytes_per_update\":%.6g,"
      "\"dropped_total_bytes_per_update\":%.6g,\"total_ratio\":%.5f,\"sent_fraction\":%.5f}\n",
      FLAGS_ranks, static_cast<long long>(FLAGS_params), FLAGS_updates, FLAGS_drop_rate,
      dense.push_bytes_per_update, dropped.push_bytes_per_update,
      dropped.push_bytes_per_update / dense.push_bytes_per_update, dense.total_bytes_per_update,
      dropped.total_bytes_per_update, dropped.total_bytes_per_update / dense.total_bytes_per_update,
      dropped.sent_fraction);
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tern::RunMain("bench-grad-drop", [] { return tern::Run(); });
}
