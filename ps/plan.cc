#include "ps/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"
#include "ps/local_strategy.h"

namespace tern::ps {
namespace {

constexpr int kMaxTau = 1 << 20;                // mini-batches accumulated before a push
constexpr double kMaxStallSeconds = 7 * 86400;  // a week

// distributed.local_steps and the outer optimizer's settings.
void CheckLocalSgd(const config::DistributedConfig& x) {
  if (x.local_steps() < 0 || x.local_steps() > kMaxTau)
    Fail("distributed.local_steps must be between 0 (off) and ", kMaxTau, ", got ",
         x.local_steps());
  if (x.local_steps() == 0) {
    const char* set = x.has_outer_learning_rate()    ? "outer_learning_rate"
                      : x.has_outer_momentum()       ? "outer_momentum"
                      : x.has_outer_nesterov()       ? "outer_nesterov"
                      : x.has_outer_momentum_delay() ? "outer_momentum_delay"
                                                     : nullptr;
    if (set != nullptr)
      Fail("distributed.", set,
           " is local SGD's outer optimizer: it needs distributed.local_steps > 0");
    return;
  }
  if (x.tau() != 1)
    Fail("distributed.tau must be 1 with distributed.local_steps (local SGD pushes every ",
         "local_steps mini-batches), got ", x.tau());
  if (x.local_optimizer_updates() > 0)
    Fail("distributed.local_optimizer_updates: not with distributed.local_steps (local SGD steps ",
         "a local optimizer throughout)");
  if (x.drop_rate() > 0)
    Fail("distributed.drop_rate: not with distributed.local_steps (the pseudo-gradient is ",
         "pushed dense)");
  if (x.has_outer_learning_rate() &&
      !(x.outer_learning_rate() > 0 && std::isfinite(x.outer_learning_rate())))
    Fail("distributed.outer_learning_rate must be a finite number > 0, got ",
         x.outer_learning_rate());
  if (x.has_outer_momentum() && !(x.outer_momentum() >= 0 && x.outer_momentum() < 1))
    Fail("distributed.outer_momentum must be in [0, 1), got ", x.outer_momentum());
  if (x.has_outer_momentum_delay()) {
    if (x.outer_momentum_delay() < 1 || x.outer_momentum_delay() > kMaxTau)
      Fail("distributed.outer_momentum_delay must be between 1 and ", kMaxTau, ", got ",
           x.outer_momentum_delay());
    if (x.outer_momentum_delay() > 1 && x.strategy() != "async")
      Fail("distributed.outer_momentum_delay needs distributed.strategy: async (a sync round's ",
           "momentum moves every round)");
  }
}

}  // namespace

DistributedSettings ReadDistributedSettings(const config::TrainConfig& config) {
  const config::DistributedConfig& x = config.distributed();
  if (x.strategy() != "sync" && x.strategy() != "async")
    Fail("distributed.strategy: unknown strategy '", x.strategy(), "' (known: async, sync)");
  if (x.tau() < 1 || x.tau() > kMaxTau)
    Fail("distributed.tau must be between 1 and ", kMaxTau, ", got ", x.tau());
  if (!(x.drop_rate() >= 0 && x.drop_rate() < 1))
    Fail("distributed.drop_rate must be in [0, 1), got ", x.drop_rate());
  if (x.drop_warmup() < 0) Fail("distributed.drop_warmup must be >= 0, got ", x.drop_warmup());
  if (x.local_optimizer_updates() < 0)
    Fail("distributed.local_optimizer_updates must be >= 0, got ", x.local_optimizer_updates());
  // The watchdog sleeps a fifth of it: an infinite or huge one would overflow the clock.
  if (!(x.stall_seconds() > 0 && x.stall_seconds() <= kMaxStallSeconds))
    Fail("distributed.stall_seconds must be in (0, ", kMaxStallSeconds, "], got ",
         x.stall_seconds());
  if (x.overlap() != "auto" && x.overlap() != "always" && x.overlap() != "never")
    Fail("distributed.overlap must be auto, always or never, got '", x.overlap(), "'");
  if (x.strategy() == "sync" && (x.drop_rate() > 0 || x.local_optimizer_updates() > 0))
    Fail("distributed.", x.drop_rate() > 0 ? "drop_rate" : "local_optimizer_updates",
         " needs distributed.strategy: async (sync SGD has no ",
         x.drop_rate() > 0 ? "gradient dropping" : "local optimizers", ")");
  if (x.drop_pulls() && (x.strategy() != "async" || x.drop_rate() <= 0))
    Fail(
        "distributed.drop_pulls needs distributed.strategy: async and distributed.drop_rate > 0 "
        "(pulls are dropped as the pushes are)");
  if (!x.tau_lr_scaling().empty() && x.tau_lr_scaling() != "linear" &&
      x.tau_lr_scaling() != "sqrt" && x.tau_lr_scaling() != "none")
    Fail("distributed.tau_lr_scaling must be linear, sqrt or none, got '", x.tau_lr_scaling(), "'");
  if (!(x.debug_slowdown() >= 0 && std::isfinite(x.debug_slowdown())))
    Fail("distributed.debug_slowdown must be a finite number >= 0 (0 or 1: off), got ",
         x.debug_slowdown());
  if (x.virtual_workers() < 0)
    Fail("distributed.virtual_workers must be >= 0 (0: off), got ", x.virtual_workers());
  if (!(x.virtual_seconds_per_token() >= 0 && std::isfinite(x.virtual_seconds_per_token())))
    Fail("distributed.virtual_seconds_per_token must be a finite number >= 0 (0: measured), got ",
         x.virtual_seconds_per_token());
  if (!(x.virtual_link_mbps() >= 0 && std::isfinite(x.virtual_link_mbps())))
    Fail("distributed.virtual_link_mbps must be a finite number >= 0 (0: unlimited), got ",
         x.virtual_link_mbps());
  if (!(x.virtual_link_delay_ms() >= 0 && std::isfinite(x.virtual_link_delay_ms())))
    Fail("distributed.virtual_link_delay_ms must be a finite number >= 0, got ",
         x.virtual_link_delay_ms());
  CheckLocalSgd(x);
  const float clip = config.optim().clip_norm();
  if (!(clip >= 0 && std::isfinite(clip)))
    Fail("optim.clip_norm must be a finite number >= 0 (0 = off), got ", clip);

  DistributedSettings s;
  s.algorithm = x.strategy();
  StrategyOptions& o = s.options;
  o.tau = x.local_steps() > 0 ? x.local_steps() : x.tau();
  o.local_sgd = x.local_steps() > 0;
  if (x.has_outer_learning_rate()) o.outer_learning_rate = x.outer_learning_rate();
  if (x.has_outer_momentum()) o.outer_momentum = x.outer_momentum();
  if (x.has_outer_nesterov()) o.outer_nesterov = x.outer_nesterov();
  if (x.has_outer_momentum_delay()) o.outer_momentum_delay = x.outer_momentum_delay();
  o.tau_lr_scaling = x.tau_lr_scaling() == "sqrt"   ? TauLrScaling::kSqrt
                     : x.tau_lr_scaling() == "none" ? TauLrScaling::kNone
                                                    : TauLrScaling::kLinear;
  o.local_optimizer_updates = x.local_optimizer_updates();
  o.drop_rate = x.drop_rate();
  o.drop_warmup = x.drop_warmup();
  o.drop_pulls = x.drop_pulls();
  o.clip_norm = clip;
  o.seed = config.training().seed();
  o.overlap = x.overlap() != "never";
  o.overlap_wait = x.overlap() == "auto" ? kAutoOverlapWait : 0;
  s.slowdown = std::max(1.0, static_cast<double>(x.debug_slowdown()));
  VirtualOptions& v = s.virtual_workers;
  v.workers = x.virtual_workers();
  v.seconds_per_token = x.virtual_seconds_per_token();
  v.link_bytes_per_second = x.virtual_link_mbps() * 1e6 / 8;
  v.link_delay_seconds = x.virtual_link_delay_ms() * 1e-3;
  v.slowdown = s.slowdown;
  return s;
}

StrategyPlan PlanStrategy(const DistributedSettings& settings, int ranks,
                          const Placement& placement) {
  StrategyPlan plan;
  plan.settings = settings;
  plan.ranks = ranks;
  const StrategyOptions& o = settings.options;
  const bool on_device = placement.host_copy && (placement.cuda || placement.prefer_device);
  if (on_device && ranks == 1 && o.tau == 1 && o.drop_rate == 0 && o.local_optimizer_updates == 0 &&
      !o.local_sgd) {
    plan.local = plan.steps_on_device = true;
    return plan;
  }
  // Sync over the device's collectives; local SGD on one rank too, so that its inner steps run
  // where the parameters live.
  if (on_device && !plan.is_async() && (ranks > 1 || o.local_sgd) &&
      (!placement.cuda || placement.nccl)) {
    if (placement.cuda && placement.gpus_shared) {
      plan.fallback_warning =
          "sync SGD reduces through host copies instead of NCCL: some ranks share a GPU";
    } else {
      plan.steps_on_device = plan.device_collectives = true;
      return plan;
    }
  }
  // On a GPU run the async shard and its optimizer state live on the GPU: a push goes up, is
  // applied there, and the fresh values come down for the reply.
  // (Local SGD's delayed outer momentum steps on the host.)
  if (placement.cuda && !(o.local_sgd && o.outer_momentum_delay > 1))
    plan.settings.options.shard_device = Device::kCuda;
  return plan;
}

std::string StrategyPlan::Describe() const {
  const StrategyOptions& o = options();
  std::string s = std::to_string(ranks) + " rank(s), strategy " + settings.algorithm;
  if (o.local_sgd) {
    char outer[160];
    std::snprintf(outer, sizeof(outer),
                  ", local SGD: %d local steps, outer %s lr %g momentum %g (delay %d)", o.tau,
                  o.outer_nesterov ? "Nesterov" : "heavy-ball", o.outer_learning_rate,
                  o.outer_momentum, o.outer_momentum_delay);
    s += outer;
  } else {
    s += ", tau " + std::to_string(o.tau);
  }
  if (local) s += "; one rank: the optimizer steps the parameters where they live";
  if (device_collectives) s += "; reduces, updates and gathers on the device";
  return s;
}

std::unique_ptr<Strategy> MakeStrategy(const StrategyPlan& plan, const config::OptimConfig& optim,
                                       comm::Communicator* comm, int64_t num_params) {
  if (plan.local)
    return std::make_unique<LocalStrategy>(plan.settings.algorithm, plan.options(), optim,
                                           num_params);
  return MakeStrategy(plan.settings.algorithm, plan.options(), optim, comm, num_params);
}

}  // namespace tern::ps
