// Strategy factory from configs.
#include "ps/strategy.h"

#include "common/error.h"
#include "ps/async_sgd.h"
#include "ps/sync_sgd.h"

namespace tern::ps {

std::unique_ptr<Strategy> MakeStrategy(const std::string& kind, const StrategyOptions& options,
                                       const config::OptimConfig& optim, comm::Communicator* comm,
                                       int64_t num_params) {
  if (options.tau < 1) Fail("distributed.tau must be >= 1, got ", options.tau);
  if (kind == "async") return std::make_unique<AsyncSgd>(options, optim, comm, num_params);
  if (kind == "sync") return std::make_unique<SyncSgd>(options, optim, comm, num_params);
  Fail("distributed.strategy: unknown strategy '", kind, "' (known: async, sync)");
}

StrategyOptions StrategyOptionsFrom(const config::TrainConfig& c) {
  StrategyOptions o;
  o.tau = std::max(1, c.distributed().tau());
  o.local_optimizer_updates = c.distributed().local_optimizer_updates();
  o.drop_rate = c.distributed().drop_rate();
  o.drop_warmup = c.distributed().drop_warmup();
  o.clip_norm = c.optim().clip_norm();
  o.seed = c.training().seed();
  const std::string& overlap = c.distributed().overlap();
  o.overlap = overlap != "never";
  o.overlap_wait = overlap == "auto" ? kAutoOverlapWait : 0;
  return o;
}

std::unique_ptr<Strategy> MakeStrategy(const config::TrainConfig& config, comm::Communicator* comm,
                                       int64_t num_params) {
  return MakeStrategy(config.distributed().strategy(), StrategyOptionsFrom(config), config.optim(),
                      comm, num_params);
}

}  // namespace tern::ps
