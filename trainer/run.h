// One training run on one rank (Run), for the trainer's own files: trainer.cc sets it up, steps,
// validates and saves; run_progress.cc reports its progress (log lines, metrics records, the async
// followers' reports and rank 0's orders) and handles stop signals. Callers use trainer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "common/timer.h"
#include "configs/tern.pb.h"
#include "graph/graph.h"
#include "graph/params.h"
#include "models/model.h"
#include "optim/loss_scale.h"
#include "optim/schedule.h"
#include "ps/plan.h"
#include "tensor/arena.h"
#include "trainer/batch_gradients.h"
#include "trainer/checkpoint.h"
#include "trainer/coordinator.h"
#include "trainer/divergence.h"
#include "trainer/gpu_select.h"
#include "trainer/metrics_log.h"
#include "trainer/smoothing.h"
#include "trainer/trainer.h"
#include "trainer/training_data.h"
#include "trainer/validator.h"
#include "trainer/watchdog.h"

namespace tern::trainer {

// Everything one training run holds, on one rank.
class Run {
 public:
  Run(const config::TrainConfig& config, const TrainerOptions& options);

  TrainResult Go();

 private:
  void Setup();
  // Before the parameters are allocated: the model's size with the vocabulary as loaded (config
  // validation had data.vocab_size), and on the CPU the memory its training needs at least
  // against the machine's.
  void CheckModelFits() const;
  void MakeStrategy();
  void CheckRanksAgree();
  void Resume();
  void Step(const models::BatchTensors& batch, int64_t target_words);
  void SetPrecision();
  void ResolvePrecision();
  // fp16: whether this step's gradients are finite (on every rank, for sync SGD), updating the
  // loss scale; when they are, divides them by the scale they were computed with.
  bool UnscaleGradients(float scale);
  bool RootDecides(bool decision);  // rank 0's decision, on every rank
  // Reads and clears the costs of the updates since the last log line and returns their sum.
  double TakeCost() { return divergence_.TakeCost(state_.update); }
  // This rank's metrics record at a log point (cost: the summed loss TakeCost gave).
  RankProgress OwnRecord(double cost, double seconds, double elapsed) const;
  // Rank 0: the job's sentences and target words as far as it knows (followers' from their
  // latest reports); sync ranks, which meet here anyway, tell it theirs. Every rank calls it.
  std::pair<int64_t, int64_t> JobCounts();
  void Log(double elapsed);
  // Async followers (coordinator_, rank > 0): the progress report at a log point and rank 0's
  // orders; true when rank 0 ordered the stop (the final checkpoint parts are sent).
  bool Follow(bool log_point);
  // Async rank 0: orders the stop and waits for every follower's last report.
  void StopFollowers();
  // Rank 0, or every rank of a sync run: whether a stop signal ends the run after this update
  // (the same answer on every rank that asks); rank 0 says so in the log.
  bool StopSignalled();
  bool Validate();  // true when training should stop early
  // The schedule's reaction to a stalled validation (the cyclic one restarts), kept in state_.
  void OnValidationStalled();
  void Save();
  ps::StepInfo Info() const;
  // On the GPU the graph runs on params_ there while checkpoints and the BLEU translation work
  // on host_params_, a host copy. A strategy on the host steps the copy: gradients come down
  // after each backward pass, and fresh values go up whenever it changed them. A strategy on
  // the device (strategy_on_device_) steps params_, and the copy comes down at each Flush. On
  // the CPU both are params_ (unless TrainerOptions::host_copy asks for the GPU's arrangement).
  graph::ParamStore& HostParams() { return host_copy_ ? host_params_ : params_; }
  Tensor HostValues() { return HostParams().values_flat(); }
  void Upload();    // host values -> params_ (host-copy runs)
  void Download();  // params_ -> host values (host-copy runs)
  // The strategy's Flush, then the copy that brings the other side up to date.
  void FlushStrategy();
  // Rank 0, after FlushStrategy: runs `fn` (validation) with the smoothed parameters in params_
  // (and the host copy), then puts the trained ones back; just runs it when smoothing is off.
  template <typename F>
  void WithSmoothedParams(F&& fn);

  config::TrainConfig config_;
  TrainerOptions options_;
  comm::Communicator* comm_;
  const int rank_, ranks_;
  const Device device_;   // where the graph runs
  const bool host_copy_;  // host_params_ in use (GPU runs; TrainerOptions::host_copy)
  // The strategy steps params_ where they live instead of the host copy: a single-GPU run
  // (ps::LocalStrategy) keeps its optimizer on the GPU, and sync SGD on several GPUs reduces
  // and updates there (over device_comm_).
  bool strategy_on_device_ = false;
  const ps::DistributedSettings settings_;           // checked before anything is allocated
  ps::StrategyPlan plan_;                            // decided in Setup, once the devices are known
  GpuChoice gpu_;                                    // GPU runs
  std::unique_ptr<comm::Communicator> device_comm_;  // NCCL, for sync SGD on several GPUs
  optim::Schedule schedule_;
  // Rank 0: the parameters' exponential average (optim.exponential_smoothing), on device_.
  ParamSmoother smoother_{config_.optim().exponential_smoothing()};
  Tensor trained_;  // WithSmoothedParams: the trained values while the average stands in
  std::optional<optim::LossScaler> loss_scaler_;  // fp16 training
  std::unique_ptr<TrainingData> data_;
  std::unique_ptr<models::Model> model_;
  graph::ParamStore params_;       // on device_
  graph::ParamStore host_params_;  // GPU runs: the host copy (see HostParams)
  std::unique_ptr<ps::Strategy> strategy_;
  std::unique_ptr<Validator> validator_;
  std::unique_ptr<Watchdog> watchdog_;  // null on one rank
  // Async SGD on several ranks: rank 0 leads, the others follow without waiting (coordinator.h).
  std::unique_ptr<AsyncCoordinator> coordinator_;
  std::unique_ptr<MetricsLog> metrics_;  // rank 0: MODEL_DIR/metrics.jsonl
  Arena arena_{device_};
  BatchUploader uploader_;  // batches onto device_ without waiting for it
  graph::Graph graph_{&arena_, /*training=*/true};
  TrainingState state_;
  Timer timer_;
  double time_offset_ = 0;                        // elapsed seconds before this process (resume)
  DivergenceWatch divergence_{config_, device_};  // the costs since the last log line
  int64_t words_since_log_ = 0;
  float sent_fraction_ = 1.f;
  bool validate_ = false;  // a dev set is configured (the same on every rank)
  // Stop signals (TrainerOptions::stop_on_signals): how many ranks had caught one at this
  // update's collective (sync on several ranks); whether a follower has asked rank 0 to stop;
  // whether one ended this run.
  float signalled_ranks_ = 0;
  bool stop_asked_ = false;
  bool stopped_by_signal_ = false;
  Timer log_timer_;
  float last_lr_ = 0;
};

}  // namespace tern::trainer
