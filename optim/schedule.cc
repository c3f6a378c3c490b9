// Learning-rate and momentum schedules (see schedule.h for the formulas).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace tern::optim {

Schedule::Schedule(const config::OptimConfig& c)
    : lr_(c.learning_rate()),
      lr_min_(c.lr_min()),
      warmup_(c.warmup_updates()),
      reference_words_(c.reference_words()),
      cycle_updates_(c.cycle_updates()),
      beta1_(c.beta1()),
      beta2_(c.beta2()),
      cooldown_after_(c.cooldown_after()),
      cooldown_beta1_(c.cooldown_beta1()),
      cooldown_beta2_(c.cooldown_beta2()) {
  const std::string& s = c.schedule();
  if (s == "constant") {
    kind_ = Kind::kConstant;
  } else if (s == "inv_sqrt") {
    kind_ = Kind::kInvSqrt;
  } else if (s == "flexible") {
    kind_ = Kind::kFlexible;
  } else if (s == "cyclic") {
    kind_ = Kind::kCyclic;
  } else {
    Fail("optim.schedule: unknown schedule '", s,
         "' (known: constant, inv_sqrt, flexible, cyclic)");
  }
  if (!(lr_ > 0)) Fail("optim.learning_rate must be > 0, got ", lr_);
  if (warmup_ < 0) Fail("optim.warmup_updates must be >= 0, got ", warmup_);
  if (kind_ == Kind::kFlexible && reference_words_ <= 0) {
    Fail("optim.reference_words must be > 0 for the flexible schedule");
  }
  if (kind_ == Kind::kCyclic) {
    if (cycle_updates_ <= 0) Fail("optim.cycle_updates must be > 0 for the cyclic schedule");
    if (lr_min_ < 0 || lr_min_ > lr_) {
      Fail("optim.lr_min must be in [0, optim.learning_rate] for the cyclic schedule, got ",
           lr_min_);
    }
  }
  if (cooldown_after_ < 0) Fail("optim.cooldown_after must be >= 0, got ", cooldown_after_);
  if (cooldown_after_ > 0 && cooldown_beta1_ == 0 && cooldown_beta2_ == 0) {
    Fail("optim.cooldown_after is set but optim.cooldown_beta1/cooldown_beta2 are 0; set them");
  }
}

float Schedule::Warm(int64_t update) const {
  if (warmup_ <= 0 || update >= warmup_) return 1.f;
  return static_cast<float>(static_cast<double>(update) / warmup_);
}

float Schedule::LearningRate(int64_t update, int64_t target_words) const {
  CHECK_GE(update, 1) << "updates are numbered from 1";
  switch (kind_) {
    case Kind::kConstant:
      return lr_ * Warm(update);
    case Kind::kInvSqrt: {
      if (update <= warmup_) return lr_ * Warm(update);
      const double w = std::max<int64_t>(warmup_, 1);
      return static_cast<float>(lr_ * std::sqrt(w / static_cast<double>(update)));
    }
    case Kind::kFlexible:
      return static_cast<float>(lr_ * Warm(update) * static_cast<double>(target_words) /
                                reference_words_);
    case Kind::kCyclic: {
      const int64_t pos = (update - cycle_start_) % cycle_updates_;
      const int64_t p = pos < 0 ? pos + cycle_updates_ : pos;
      return static_cast<float>(lr_min_ + (lr_ - lr_min_) * static_cast<double>(p) /
                                              static_cast<double>(cycle_updates_));
    }
  }
  return lr_;
}

void Schedule::Betas(int64_t update, float* beta1, float* beta2) const {
  const bool cooled = cooldown_after_ > 0 && update > cooldown_after_;
  *beta1 = cooled ? cooldown_beta1_ : beta1_;
  *beta2 = cooled ? cooldown_beta2_ : beta2_;
}

StepOptions Schedule::Options(int64_t update, int64_t target_words) const {
  StepOptions o;
  o.learning_rate = LearningRate(update, target_words);
  Betas(update, &o.beta1, &o.beta2);
  return o;
}

void Schedule::OnValidationStalled(int64_t update) {
  if (kind_ == Kind::kCyclic) cycle_start_ = update + 1;
}

}  // namespace tern::optim
