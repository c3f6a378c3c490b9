// Optimizers over flat float32 spans. A parameter-server shard owns one contiguous range of the
// flat parameter buffer together with that range's optimizer state, so an Optimizer is sized for
// one span (n values) and every Step gets 1-D views of exactly that span.
//
// Hyper-parameters that schedules change per update (learning rate, Adam's betas for momentum
// cooldown) come in StepOptions on each call rather than living in the optimizer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "tensor/tensor.h"

namespace tern::optim {

struct StepOptions {
  float learning_rate = 0.f;
  float beta1 = 0.9f;  // Adam's first moment; SGD's momentum (0 = plain SGD)
  float beta2 = 0.999f;
  // Multiplies the gradient before use (global-norm clipping, averaging over ranks or tau).
  float grad_scale = 1.f;
  // fp16's loss-scaling decision made on the parameters' device (LossScaler::Apply: one float, 1
  // or 0), or undefined: when 0 the step changes nothing and does not count in Adam's bias
  // correction, and the host never reads it.
  Tensor apply = Tensor();
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // params (n) -= update(grads (n)). Both float32, 1-D, n == size(), on one device (CPU or
  // CUDA; the state lives on the device of the first step, and every step must use that one).
  void Step(const Tensor& params, const Tensor& grads, const StepOptions& options) {
    StepAndCopy(params, grads, options, nullptr);
  }
  // Step, also writing the updated parameters to out (n, host; CPU spans only) in the same pass
  // over memory when out is not null: a parameter-server shard replies with its fresh values
  // without reading them back.
  virtual void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& options,
                           float* out) = 0;

  // Serialized state (kind, size, step count, moment buffers), for checkpoints. LoadState
  // throws tern::Error on bytes that are not this kind's state of this size.
  virtual std::string SaveState() const = 0;
  virtual void LoadState(const std::string& bytes) = 0;

  // Float32 values of optimizer state held (2n for Adam, n for SGD with momentum).
  virtual int64_t state_size() const = 0;
  virtual const char* name() const = 0;

  int64_t size() const { return size_; }
  // Updates applied so far (Adam's bias correction uses it). After gated steps (StepOptions::
  // apply) it reads how many of them were skipped from their device: a wait there.
  int64_t steps() const;

 protected:
  explicit Optimizer(int64_t size) : size_(size) {}
  void CheckArgs(const Tensor& params, const Tensor& grads) const;
  // Counts a step (steps_ + 1) and, when its options carry `apply`, makes its StepGate state on
  // `device` (ops.h: the flag and Adam's corrections for the steps applied), returned for the
  // update kernel; undefined otherwise.
  Tensor CountStep(const StepOptions& options, Device device);
  // After LoadState: the loaded step count holds, no gated step skipped yet.
  void ResetGate() { gate_ = Tensor(); }

  int64_t size_;
  int64_t steps_ = 0;  // steps counted, gated ones that were skipped included (see steps())

 private:
  Tensor gate_;  // (kStepGateSize) on the device of the first gated step, since the last load
};

struct AdamOptions {
  float epsilon = 1e-8f;
  float weight_decay = 0.f;  // decoupled (AdamW): p -= lr * weight_decay * p
};

// Adam (Kingma & Ba 2015) with bias correction:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + lr * wd * p
std::unique_ptr<Optimizer> MakeAdam(int64_t size, const AdamOptions& options);

// SGD with momentum mu = StepOptions::beta1:  u = mu u + g;  p -= lr * u + lr * wd * p.
// Nesterov's:  u = mu u + g;  p -= lr * (g + mu u) + lr * wd * p.
std::unique_ptr<Optimizer> MakeSgd(int64_t size, float weight_decay = 0.f, bool nesterov = false);

// The outer optimizer of asynchronous local SGD (ps/ local_steps): SGD with momentum whose
// momentum moves once every `delay` steps (Liu et al. 2024, "delayed Nesterov"). Each step applies
// its own gradient at once, at lr / delay, and adds it to a buffer b; every delay-th step
// u = mu u + b / delay and p -= lr mu u (Nesterov; heavy-ball: lr mu u before the update), so
// `delay` steps move p as one step of the optimizer on their mean would. delay 1 is MakeSgd's
// update. Host spans only; state: u, b and the step count.
std::unique_ptr<Optimizer> MakeDelayedMomentumSgd(int64_t size, int delay, bool nesterov);

// Re-sharding a checkpoint onto another rank count. Optimizer state is elementwise, so the
// state of a span is the concatenation of its parts' states and can be cut anywhere.
// JoinStates: the state of the concatenation of the parts' spans (same kind; the step count is
// the largest part's: shards saved a push apart differ by one). SliceState: the state of
// [begin, end) of the span `bytes` describes. Both throw tern::Error on malformed state.
std::string JoinStates(const std::vector<std::string>& parts);
std::string SliceState(const std::string& bytes, int64_t begin, int64_t end);

// "adam" or "sgd" from optim.optimizer, with epsilon and weight_decay from the config.
std::unique_ptr<Optimizer> MakeOptimizer(const config::OptimConfig& config, int64_t size);

}  // namespace tern::optim
