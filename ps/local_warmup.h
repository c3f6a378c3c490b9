// The local-optimizer warm-up of asynchronous SGD (distributed.local_optimizer_updates K;
// Bogoychev et al. 2018). A worker that sums tau mini-batch gradients before a push computes the
// later ones on parameters that have not seen the earlier ones: staleness inside its own group.
// For its first K mini-batches it therefore also steps its own copy of the parameters with each
// mini-batch gradient, through an optimizer of its own at the schedule's rate, so the next
// gradient sees them. The global model gets the group's push as usual, and nothing else: the
// local steps only move the worker's copy until fresh parameters replace it.
//
// Fresh parameters pulled in the middle of a group lack that group's mini-batches (they are not
// pushed yet): the group's local steps are applied again on top of them (Reapply). Once the
// group is pushed, fresh parameters include it, and its steps are forgotten (GroupPushed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "configs/tern.pb.h"
#include "optim/optimizer.h"
#include "tensor/tensor.h"

namespace tern::ps {

class LocalWarmup {
 public:
  // size: the flat parameters' length; updates: K.
  LocalWarmup(const config::OptimConfig& optim, int64_t size, int64_t updates);

  // Whether mini-batch `update` (1-based, the worker's) is in the warm-up.
  bool active(int64_t update) const { return update <= updates_; }
  // Steps params (n, host) with this mini-batch's grads (n) and adds the change to the group's.
  void Step(const Tensor& params, const Tensor& grads, const optim::StepOptions& options);
  // params (n): fresh values that lack the current group; adds the group's local steps.
  void Reapply(float* params) const;
  // The group was pushed: later fresh values include it.
  void GroupPushed();
  // out (n) = minus the group's local steps: local SGD's pseudo-gradient, start - end.
  void PseudoGradient(float* out) const;
  // The local optimizer's state (local SGD's worker state, for checkpoints).
  std::string SaveOptimizerState() const { return optimizer_->SaveState(); }
  void LoadOptimizerState(const std::string& bytes) { optimizer_->LoadState(bytes); }

 private:
  const int64_t updates_;
  std::unique_ptr<optim::Optimizer> optimizer_;  // (n)
  std::vector<float> before_;                    // (n) scratch: params before a step
  std::vector<float> delta_;                     // (n) the group's local steps so far
  bool has_delta_ = false;
};

}  // namespace tern::ps
