// Learning-rate and momentum schedules (Bogoychev's thesis, ch. 5; Marian's rate options).
//
// Updates are numbered from 1: Options(t) gives the hyper-parameters of the t-th update.
//   constant:  lr * warm(t)
//   inv_sqrt:  lr * t/W for t <= W, then lr * sqrt(W/t)   (W = warmup_updates; W = 0: lr/sqrt(t))
//   flexible:  lr * warm(t) * target_words / reference_words
//   cyclic:    lr_min + (lr - lr_min) * ((t - start) mod C) / C, C = cycle_updates, start = 1 and
//              moved by OnValidationStalled, so a stall restarts the ramp at lr_min.
// where warm(t) = min(1, t/W) (1 when W = 0). Momentum cooldown: updates t > cooldown_after use
// cooldown_beta1/cooldown_beta2 instead of beta1/beta2 (cooldown_after = 0: never).
#pragma once

#include <cstdint>

#include "configs/tern.pb.h"
#include "optim/optimizer.h"

namespace tern::optim {

class Schedule {
 public:
  enum class Kind { kConstant, kInvSqrt, kFlexible, kCyclic };

  // Throws tern::Error naming the optim.* field that makes the schedule unusable.
  explicit Schedule(const config::OptimConfig& config);

  // target_words: this mini-batch's target words (used by "flexible" only).
  float LearningRate(int64_t update, int64_t target_words = 0) const;
  void Betas(int64_t update, float* beta1, float* beta2) const;
  // Learning rate and betas together, grad_scale 1.
  StepOptions Options(int64_t update, int64_t target_words = 0) const;

  // Validation did not improve after `update` updates: cyclic restarts its ramp at update + 1.
  // Other kinds ignore it.
  void OnValidationStalled(int64_t update);

  Kind kind() const { return kind_; }
  // The update that began the current cycle; checkpoints save it and set it back.
  int64_t cycle_start() const { return cycle_start_; }
  void set_cycle_start(int64_t update) { cycle_start_ = update; }

 private:
  float Warm(int64_t update) const;

  Kind kind_;
  float lr_;
  float lr_min_;
  int64_t warmup_;
  int64_t reference_words_;
  int64_t cycle_updates_;
  int64_t cycle_start_ = 1;
  float beta1_, beta2_;
  int64_t cooldown_after_;
  float cooldown_beta1_, cooldown_beta2_;
};

}  // namespace tern::optim
