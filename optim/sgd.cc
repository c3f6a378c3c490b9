// SGD with (heavy-ball) momentum and decoupled weight decay over a flat span.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common/thread_pool.h"
#include "optim/optimizer.h"
#include "optim/state_io.h"

namespace tern::optim {
namespace {

constexpr int64_t kGrain = 1 << 14;
constexpr int64_t kCopyBlock = 2048;

class Sgd final : public Optimizer {
 public:
  Sgd(int64_t size, float weight_decay)
      : Optimizer(size), weight_decay_(weight_decay), u_(size, 0.f) {}

  void StepAndCopy(const Tensor& params, const Tensor& grads, const StepOptions& o,
                   float* out) override {
    CheckArgs(params, grads);
    ++steps_;
    const float mu = o.beta1, lr = o.learning_rate, scale = o.grad_scale;
    const float decay = o.learning_rate * weight_decay_;
    float* p = params.f32();
    const float* g = grads.f32();
    // Without momentum the buffer would only hold the last gradient: it is not kept (as in
    // PyTorch), which saves two of the step's passes over memory; momentum turned on later
    // starts from zero.
    const bool keep = mu != 0.f;
    if (keep && momentum_dropped_) std::fill(u_.begin(), u_.end(), 0.f);
    momentum_dropped_ = !keep;
    float* u = u_.data();
    ParallelFor(size_, kGrain, [=](int64_t chunk_begin, int64_t chunk_end) {
      // Blocks small enough that the copy to out reads the fresh values from L1.
      for (int64_t begin = chunk_begin; begin < chunk_end; begin += kCopyBlock) {
        const int64_t end = std::min(chunk_end, begin + kCopyBlock);
        if (keep) {
          for (int64_t i = begin; i < end; ++i) {
            const float ui = mu * u[i] + g[i] * scale;
            u[i] = ui;
            p[i] -= lr * ui + decay * p[i];
          }
        } else {
          for (int64_t i = begin; i < end; ++i) p[i] -= lr * (g[i] * scale) + decay * p[i];
        }
        if (out != nullptr) std::memcpy(out + begin, p + begin, (end - begin) * sizeof(float));
      }
    });
  }

  std::string SaveState() const override {
    if (momentum_dropped_) {
      const std::vector<float> zeros(size_, 0.f);
      return internal::EncodeState(internal::StateKind::kSgd, size_, steps_, {&zeros});
    }
    return internal::EncodeState(internal::StateKind::kSgd, size_, steps_, {&u_});
  }
  void LoadState(const std::string& bytes) override {
    internal::DecodeState(bytes, internal::StateKind::kSgd, size_, &steps_, {&u_});
    momentum_dropped_ = false;
  }
  int64_t state_size() const override { return size_; }
  const char* name() const override { return "sgd"; }

 private:
  float weight_decay_;
  std::vector<float> u_;           // (n) momentum buffer
  bool momentum_dropped_ = false;  // u_ is stale (the last step had no momentum): reads as 0
};

}  // namespace

std::unique_ptr<Optimizer> MakeSgd(int64_t size, float weight_decay) {
  CHECK_GE(size, 0);
  return std::make_unique<Sgd>(size, weight_decay);
}

}  // namespace tern::optim
