// Divergence: the costs of the updates since the last log point, kept where the graph runs (read
// at log points only, so a GPU run never waits for its device between them), and the count of
// updates in a row whose cost was not a finite number; the one-line errors that stop a run.
#pragma once

#include <cstdint>
#include <string>

#include "configs/tern.pb.h"
#include "graph/params.h"
#include "tensor/tensor.h"

namespace tern::trainer {

class DivergenceWatch {
 public:
  DivergenceWatch(const config::TrainConfig& config, Device device);

  // The cost of the update just computed (a one-value tensor on the device); a log point comes
  // at least every training.disp_freq updates.
  void AddCost(const Tensor& loss);
  // Reads and clears the costs since the last call and returns their sum; `update` is the last
  // one added. Counts the updates in a row whose cost was not finite.
  double TakeCost(int64_t update);
  // A cost already on the host (virtual workers read each one): counted at once.
  void AddHostCost(float cost, int64_t update) { Count(cost, update); }
  // training.max_nonfinite_updates in a row.
  bool Diverged() const { return nonfinite_run_ >= max_nonfinite_; }
  // The update of the last checkpoint written or resumed from (0: none), for the messages.
  void Saved(int64_t update) { last_saved_ = update; }

  // tern::Error: the run diverged (rank 0 says how; the others point to it).
  [[noreturn]] void Fail(int rank) const;
  // tern::Error naming the first parameter that is not finite, so no checkpoint ever holds one.
  void CheckParametersFinite(const graph::ParamStore& params, int64_t update) const;

 private:
  std::string Advice() const;
  // One update's cost into the count of non-finite ones in a row.
  void Count(float cost, int64_t update);

  const int max_nonfinite_;
  const float learning_rate_;
  const int64_t window_;
  const Device device_;
  Tensor step_costs_;  // (window_) on device_, made at the first cost
  int64_t steps_ = 0;  // costs in step_costs_
  int64_t nonfinite_run_ = 0, nonfinite_from_ = 0;
  int64_t last_saved_ = 0;
};

}  // namespace tern::trainer
