// The strategy factory (ps/plan.h decides which one a training job runs).
#include "ps/strategy.h"

#include "common/error.h"
#include "ps/async_sgd.h"
#include "ps/sync_sgd.h"

namespace tern::ps {

std::unique_ptr<Strategy> MakeStrategy(const std::string& kind, const StrategyOptions& options,
                                       const config::OptimConfig& optim, comm::Communicator* comm,
                                       int64_t num_params) {
  if (kind == "async") return std::make_unique<AsyncSgd>(options, optim, comm, num_params);
  if (kind == "sync") return std::make_unique<SyncSgd>(options, optim, comm, num_params);
  Fail("distributed.strategy: unknown strategy '", kind, "' (known: async, sync)");
}

}  // namespace tern::ps
