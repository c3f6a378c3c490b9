#include "trainer/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <thread>

#include "comm/nccl_communicator.h"
#include "common/checksum.h"
#include "common/dir_lock.h"
#include "common/error.h"
#include "common/file_io.h"
#include "common/stop_signal.h"
#include "common/timer.h"
#include "configs/config_io.h"
#include "configs/model_size.h"
#include "graph/graph.h"
#include "graph/params.h"
#include "models/model.h"
#include "optim/loss_scale.h"
#include "optim/schedule.h"
#include "ps/plan.h"
#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "tensor/threads.h"
#include "trainer/batch_gradients.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_handover.h"
#include "trainer/checkpoint_reshard.h"
#include "trainer/coordinator.h"
#include "trainer/divergence.h"
#include "trainer/gpu_select.h"
#include "trainer/metrics_log.h"
#include "trainer/progress_log.h"
#include "trainer/smoothing.h"
#include "trainer/training_data.h"
#include "trainer/validator.h"
#include "trainer/virtual_run.h"
#include "trainer/watchdog.h"

namespace tern::trainer {
namespace {

// The device training.device names; a clear error when it is cuda and no GPU is visible.
Device TrainingDevice(const config::TrainConfig& config) {
  if (config.training().device() != "cuda") return Device::kCpu;
  if (!CudaAvailable()) {
    Fail("training.device: cuda: no CUDA GPU is visible to this process (or this build has no ",
         "CUDA backend); set training.device: cpu or run where a GPU is");
  }
  return Device::kCuda;
}

// Everything one training run holds, on one rank.
class Run {
 public:
  Run(const config::TrainConfig& config, const TrainerOptions& options)
      : config_(config),
        options_(options),
        comm_(options.comm),
        rank_(options.comm->rank()),
        ranks_(options.comm->size()),
        device_(TrainingDevice(config)),
        host_copy_(device_ != Device::kCpu || options.host_copy),
        settings_(ps::ReadDistributedSettings(config)),
        schedule_(config.optim()) {}

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

void Run::Setup() {
  SetComputeThreads(config_.training().threads() > 0 ? config_.training().threads()
                                                     : DefaultComputeThreads());
  MakeDirs(options_.model_dir);
  if (device_ == Device::kCuda) gpu_ = SelectGpuForRank(comm_);
  // Rank 0 trains the vocabulary (if needed) before the others load it.
  if (rank_ != 0) comm_->Barrier();
  data_ = std::make_unique<TrainingData>(config_, options_.model_dir, rank_, ranks_);
  if (rank_ == 0) comm_->Barrier();
  CheckModelFits();
  model_ = models::CreateModel(config_.model(), data_->vocab().size());
  model_->AddParams(&params_);
  params_.Finalize(device_, config_.training().seed());
  if (host_copy_) {
    model_->AddParams(&host_params_);
    // Page-locked on a GPU run: the gradient comes down and the parameters go up through it.
    host_params_.Finalize(Device::kCpu, config_.training().seed(),
                          /*pinned=*/device_ != Device::kCpu);
  }
  CheckRanksAgree();
  SetPrecision();
  if (ranks_ > 1) {
    watchdog_ = std::make_unique<Watchdog>(comm_, config_.distributed().stall_seconds());
    LOG(INFO) << "[training] rank " << rank_ << " of " << ranks_ << " is pid " << ::getpid();
  }
  MakeStrategy();
  const config::DataConfig& d = config_.data();
  validate_ =
      !d.valid_src().empty() && !d.valid_tgt().empty() && config_.training().valid_freq() > 0;
  if (rank_ == 0) {
    validator_ = std::make_unique<Validator>(config_, data_->vocab());
    metrics_ = std::make_unique<MetricsLog>(options_.model_dir + "/metrics.jsonl");
  }
  int64_t count = 0;
  for (int i = 0; i < params_.size(); ++i) count += params_.info(i).shape.numel();
  if (rank_ == 0) {
    LOG(INFO) << "[model] " << config_.model().arch() << ": " << params_.size() << " tensors, "
              << WithCommas(count) << " parameters; vocabulary " << data_->vocab().size();
    LOG(INFO) << "[training] " << plan_.Describe();
    WriteFileAtomic(options_.model_dir + "/config.pbtxt", config::ToText(config_));
  }
}

void Run::CheckModelFits() const {
  const int64_t memory =
      device_ == Device::kCpu ? int64_t{::sysconf(_SC_PHYS_PAGES)} * ::sysconf(_SC_PAGE_SIZE) : 0;
  std::string error;
  if (!config::CheckModelSize(config_, data_->vocab().size(), memory, &error)) Fail(error);
}

void Run::SetPrecision() {
  const std::string& p = config_.training().precision();
  if (p == "float32") return;
  graph_.set_matmul_inputs(p == "bf16" ? DType::kBFloat16 : DType::kFloat16);
  if (p == "fp16")
    loss_scaler_.emplace(config_.training().loss_scale(), config_.training().loss_scale_window());
  if (rank_ == 0) {
    LOG(INFO) << "[training] mixed precision: matrix products take " << p
              << " operands and accumulate in float32; parameters, gradients and optimizer "
                 "state stay float32"
              << (loss_scaler_ ? " (dynamic loss scaling)" : "");
    if (!NativeProductInputs(device_, graph_.matmul_inputs())) {
      LOG(WARNING) << "[training] training.precision: " << p
                   << " on this CPU rounds the operands in software: the GPU's numbers, "
                      "more slowly than float32 (bf16 runs in hardware on CPUs with AVX512-BF16)";
    }
  }
}

bool Run::UnscaleGradients(float scale) {
  const Tensor grads = params_.grads_flat();
  float bad = std::isfinite(SumSquares(grads)) ? 0.f : 1.f;
  // Sync SGD's ranks reduce together: they skip together.
  if (plan_.ranks_meet_every_update()) {
    Watchdog::Waiting waiting(watchdog_.get());
    comm_->AllReduceSum(Tensor(&bad, Shape{1}));
  }
  if (!loss_scaler_->Update(bad == 0)) return false;
  Scale(grads, 1.f / scale);  // exact: the scale is a power of two
  return true;
}

void Run::MakeStrategy() {
  ps::Placement placement;
  placement.host_copy = host_copy_;
  placement.prefer_device = options_.strategy_on_device;
  placement.cuda = device_ == Device::kCuda;
  placement.nccl = comm::NcclAvailable();
  placement.gpus_shared = gpu_.shared;
  plan_ = ps::PlanStrategy(settings_, ranks_, placement);
  if (!plan_.fallback_warning.empty() && rank_ == 0)
    LOG(WARNING) << "[training] " << plan_.fallback_warning;
  strategy_on_device_ = plan_.steps_on_device;
  comm::Communicator* comm = comm_;
  if (plan_.device_collectives && device_ == Device::kCuda) {
    device_comm_ = comm::MakeNcclCommunicator(comm_, gpu_.device);
    comm = device_comm_.get();
  }
  strategy_ = ps::MakeStrategy(plan_, config_.optim(), comm, params_.total_size());
  if (plan_.local) {
    LOG(INFO) << "[training] one rank: the optimizer steps the parameters on "
              << DeviceName(device_) << " (no host round trip per update)";
    // fp16's overflow check and loss scale go there too: a step never waits for the norm.
    if (loss_scaler_) loss_scaler_->MoveTo(device_);
  } else if (plan_.device_collectives && rank_ == 0) {
    LOG(INFO) << "[training] sync SGD reduces, updates and gathers on " << DeviceName(device_)
              << " over " << comm->name();
  }
}

// Every rank must train the same model on the same vocabulary with the same config.
void Run::CheckRanksAgree() {
  uint64_t mine[3] = {config::ConfigHash(config_), Crc32(data_->vocab().serialized()),
                      static_cast<uint64_t>(params_.total_size())};
  uint64_t root[3] = {mine[0], mine[1], mine[2]};
  comm_->Broadcast(root, sizeof(root), 0);
  const char* what[3] = {"config (hash)", "vocabulary (data.vocab)", "parameter count"};
  uint64_t bad = 0;
  for (int i = 0; i < 3; ++i)
    if (mine[i] != root[i]) bad |= 1u << i;
  float any = static_cast<float>(bad);
  comm_->AllReduceSum(Tensor(&any, Shape{1}));
  for (int i = 0; i < 3; ++i)
    if (bad & (1u << i))
      Fail("rank ", rank_, ": its ", what[i], " differs from rank 0's (", mine[i], " vs ", root[i],
           "); start every rank with the same config, vocabulary and program");
  if (any != 0) Fail("rank ", rank_, ": another rank's config, vocabulary or model differs");
}

void Run::Upload() {
  if (host_copy_) Copy(host_params_.values_flat(), params_.values_flat());
}

void Run::Download() {
  if (host_copy_) Copy(params_.values_flat(), host_params_.values_flat());
}

void Run::FlushStrategy() {
  if (strategy_on_device_) {
    strategy_->Flush(params_.values_flat(), Info());
    Download();
  } else {
    strategy_->Flush(HostValues(), Info());
    Upload();
  }
}

template <typename F>
void Run::WithSmoothedParams(F&& fn) {
  if (!smoother_.average().defined()) {
    fn();
    return;
  }
  const Tensor values = params_.values_flat();
  if (!trained_.defined()) trained_ = Tensor::Empty(values.shape(), DType::kFloat32, device_);
  Copy(values, trained_);
  Copy(smoother_.average(), values);
  Download();
  fn();
  Copy(trained_, values);
  Download();
}

ps::StepInfo Run::Info() const {
  ps::StepInfo info;
  info.update = state_.update;
  info.options = schedule_.Options(std::max<int64_t>(state_.update, 1));
  return info;
}

void Run::Resume() {
  Watchdog::Waiting waiting(watchdog_.get());
  std::optional<Checkpoint> c;
  int saved_ranks = 0;
  if (rank_ == 0) {
    RemoveUnfinishedCheckpoints(options_.model_dir);  // left by a crash or a full disk
    c = LoadLatestCheckpoint(options_.model_dir);
    if (c) {
      for (const config::FieldChange& f :
           CheckResumeConfig(c->config, config_, options_.model_dir + "/checkpoint.latest")) {
        LOG(INFO) << "[training] resuming with " << f.field << " " << f.after
                  << " (the checkpoint's: " << f.before << ")";
      }
      if (c->params.numel() != params_.total_size())
        Fail(options_.model_dir, ": the checkpoint holds ", c->params.numel(),
             " parameter values but this config's model has ", params_.total_size(),
             "; use the config it was trained with or a new --model-dir");
      if (c->vocab_bytes != data_->vocab().serialized())
        Fail(options_.model_dir, ": the checkpoint's vocabulary differs from data.vocab; ",
             "use the vocabulary it was trained with or a new --model-dir");
      saved_ranks = static_cast<int>(c->shard_states.size());
      ReshardCheckpoint(settings_.algorithm, ranks_, &*c);
      Copy(c->params, HostValues());
      // Without a saved average (smoothing newly on), it starts at the next update's values.
      if (smoother_.active() && c->smoothed.defined()) smoother_.Restore(c->smoothed, device_);
    }
  }
  comm_->Broadcast(&saved_ranks, sizeof(saved_ranks), 0);
  if (strategy_on_device_) {
    Upload();
    strategy_->Init(params_.values_flat());  // sync: rank 0's parameters to every rank
    Download();
  } else {
    strategy_->Init(HostValues());  // rank 0's parameters to every rank
    Upload();
  }
  if (saved_ranks == 0) {
    // Records of a run that never saved a checkpoint describe training this one does again.
    if (metrics_) {
      metrics_->Clear();
      metrics_->Append(MetricsLine(StartRecord{0, 0, ranks_}));
    }
    data_->Start("");
    return;
  }
  const RankShare share = HandOutCheckpoint(comm_, c ? &*c : nullptr, &state_);
  strategy_->LoadShardState(share.shard);
  strategy_->LoadWorkerState(share.worker);
  // Once every rank holds its restored shard, a pull tells the workers the shards' versions (and
  // values, which are the checkpoint's), so the first push's staleness counts from them.
  comm_->Barrier();
  FlushStrategy();
  schedule_.set_cycle_start(state_.cycle_start);
  if (loss_scaler_ && state_.loss_scale > 0)
    loss_scaler_->Restore(static_cast<float>(state_.loss_scale), state_.loss_scale_good_steps);
  data_->Start(share.data);
  time_offset_ = state_.elapsed_seconds;
  divergence_.Saved(state_.update);
  if (metrics_) {
    metrics_->KeepUpTo(state_.elapsed_seconds);
    metrics_->Append(MetricsLine(StartRecord{state_.update, state_.elapsed_seconds, ranks_}));
  }
  if (rank_ == 0)
    LOG(INFO) << "[training] resumed from update " << state_.update << " (epoch "
              << state_.epoch + 1 << ")";
}

void Run::Step(const models::BatchTensors& batch, int64_t target_words) {
  // One tape for the whole run: Clear keeps the node vector's capacity (no per-step allocation).
  graph::Graph& g = graph_;
  g.Clear((config_.training().seed() * 1000003ull + static_cast<uint64_t>(state_.update)) *
              1009ull +
          static_cast<uint64_t>(rank_));
  // Sync SGD's loss is the mean over the words of every rank's batch (batch_gradients.h); the
  // same collective tells every sync rank whether any has caught a stop signal.
  float shared[2] = {static_cast<float>(target_words),
                     options_.stop_on_signals && StopSignal() != 0 ? 1.f : 0.f};
  if (plan_.ranks_meet_every_update()) {
    Watchdog::Waiting waiting(watchdog_.get());
    comm_->AllReduceSum(Tensor(shared, Shape{2}));
  }
  const float words = shared[0];
  signalled_ranks_ = shared[1];
  // fp16: the loss scale on the host, or on the device (one rank): read there, not here.
  const bool scale_on_device = loss_scaler_ && loss_scaler_->on_device();
  const float loss_scale = loss_scaler_ && !scale_on_device ? loss_scaler_->scale() : 1.f;
  const Timer compute;
  graph::Var loss =
      BatchGradients(g, *model_, params_, batch, config_.optim().label_smoothing(), words,
                     loss_scale, scale_on_device ? loss_scaler_->SeedScale() : Tensor());
  if (settings_.slowdown > 1 && rank_ == ranks_ - 1) {
    // distributed.debug_slowdown: a straggler for experiments, the last rank taking `slowdown`
    // times its compute time (on a GPU, the time to queue the step).
    std::this_thread::sleep_for(
        std::chrono::duration<double>((settings_.slowdown - 1) * compute.Seconds()));
  }
  divergence_.AddCost(loss.value());
  // An fp16 step whose gradients overflowed counts as an update but changes nothing.
  state_.update += 1;
  ps::StepInfo info;
  info.update = state_.update;
  info.options = schedule_.Options(state_.update, target_words);
  last_lr_ = info.options.learning_rate;
  if (scale_on_device) {
    // Decided and unscaled on the device; a step that overflowed is skipped there.
    loss_scaler_->Decide(params_.grads_flat());
    info.options.apply = loss_scaler_->Apply();
  } else if (loss_scaler_ && !UnscaleGradients(loss_scale)) {
    if (watchdog_) watchdog_->Progress(state_.update);
    arena_.Reset();
    return;
  }
  if (host_copy_ && !strategy_on_device_) Copy(params_.grads_flat(), host_params_.grads_flat());

  ps::StepResult r;
  {
    Watchdog::Waiting waiting(watchdog_.get());
    r = strategy_on_device_ ? strategy_->Step(params_.grads_flat(), params_.values_flat(), info)
                            : strategy_->Step(HostParams().grads_flat(), HostValues(), info);
  }
  if (r.params_changed && !strategy_on_device_) Upload();
  if (rank_ == 0 && smoother_.active()) smoother_.Update(params_.values_flat(), state_.update);
  if (watchdog_) watchdog_->Progress(state_.update);
  if (r.pushed) sent_fraction_ = r.sent_fraction;
  arena_.Reset();
}

bool Run::RootDecides(bool decision) {
  if (ranks_ == 1 || coordinator_) return decision;  // a led run: only rank 0 decides
  Watchdog::Waiting waiting(watchdog_.get());
  char d = decision ? 1 : 0;
  comm_->Broadcast(&d, 1, 0);
  return d != 0;
}

bool Run::Follow(bool log_point) {
  const int signal = options_.stop_on_signals ? StopSignal() : 0;
  auto report = [&](bool last) {
    const double seconds = log_timer_.Seconds();
    coordinator_->Report({state_.update, state_.sentences, words_since_log_, seconds, signal,
                          OwnRecord(TakeCost(), seconds, time_offset_ + timer_.Seconds())},
                         last);
    words_since_log_ = 0;
    log_timer_.Reset();
  };
  const bool ask = signal != 0 && !stop_asked_;  // rank 0 stops the job: ask it, once
  if (log_point || ask) report(false);
  stop_asked_ |= ask;
  for (AsyncCoordinator::Order order : coordinator_->Orders()) {
    switch (order) {
      case AsyncCoordinator::Order::kStalled:
        OnValidationStalled();
        break;
      case AsyncCoordinator::Order::kSave:
        Save();
        break;
      case AsyncCoordinator::Order::kStop:
      case AsyncCoordinator::Order::kStopOnSignal:
        stopped_by_signal_ = order == AsyncCoordinator::Order::kStopOnSignal;
        report(/*last=*/true);
        Save();
        return true;  // rank 0 sends nothing after the stop
    }
  }
  return false;
}

void Run::StopFollowers() {
  Watchdog::Waiting waiting(watchdog_.get());
  coordinator_->Send(stopped_by_signal_ ? AsyncCoordinator::Order::kStopOnSignal
                                        : AsyncCoordinator::Order::kStop);
  coordinator_->AwaitLastReports();
}

bool Run::StopSignalled() {
  if (!options_.stop_on_signals) return false;
  const int own = StopSignal();
  std::string what;
  if (coordinator_) {  // rank 0 of an async run: its own signal or a follower's request
    coordinator_->Collect();
    const AsyncCoordinator::StopRequest r = coordinator_->stop_request();
    if (own == 0 && r.rank == 0) return false;
    what = own != 0 ? SignalName(own) + " on rank 0"
                    : SignalName(r.signal) + " on rank " + std::to_string(r.rank);
  } else if (ranks_ > 1) {  // sync: this update's collective told every rank
    if (signalled_ranks_ == 0) return false;
    what = own != 0 ? SignalName(own) + " on rank 0" : "a stop signal on another rank";
  } else {
    if (own == 0) return false;
    what = SignalName(own);
  }
  if (rank_ == 0)
    LOG(WARNING) << "[training] " << what << ": saving checkpoint-" << state_.update
                 << " and stopping; run the same command again to resume";
  stopped_by_signal_ = true;
  return true;
}

RankProgress Run::OwnRecord(double cost, double seconds, double elapsed) const {
  RankProgress r;
  r.rank = rank_;
  r.update = state_.update;
  r.epoch = state_.epoch + 1;
  r.elapsed_seconds = elapsed;
  r.sentences = state_.sentences;
  r.target_words = state_.target_words;
  r.cost_per_word = cost / std::max<int64_t>(words_since_log_, 1);
  r.learning_rate = last_lr_;
  r.words_per_second = static_cast<float>(words_since_log_ / std::max(seconds, 1e-9));
  if (settings_.options.drop_rate > 0) r.sent_fraction = sent_fraction_;
  const ps::StrategyStats stats = strategy_->stats();
  if (plan_.has_staleness()) r.staleness = SummarizeStaleness(stats.staleness);
  r.bytes_pushed = stats.bytes_pushed;
  r.bytes_pulled = stats.bytes_pulled;
  r.cpu_seconds = ProcessCpuSeconds();
  return r;
}

std::pair<int64_t, int64_t> Run::JobCounts() {
  int64_t counts[2] = {state_.sentences, state_.target_words};
  if (coordinator_) {
    coordinator_->Collect();
    for (int r = 1; r < ranks_; ++r) {
      counts[0] += coordinator_->latest(r).record.sentences;
      counts[1] += coordinator_->latest(r).record.target_words;
    }
  } else if (ranks_ > 1) {
    if (rank_ != 0) {
      comm_->Send(0, AsyncCoordinator::kTagSyncCounts, counts, sizeof(counts));
    } else {
      std::string bytes;
      for (int r = 1; r < ranks_; ++r) {
        comm_->Recv(r, AsyncCoordinator::kTagSyncCounts, &bytes);
        CHECK_EQ(bytes.size(), sizeof(counts));
        int64_t theirs[2];
        std::memcpy(theirs, bytes.data(), sizeof(theirs));
        counts[0] += theirs[0];
        counts[1] += theirs[1];
      }
    }
  }
  return {counts[0], counts[1]};
}

void Run::Log(double elapsed) {
  Watchdog::Waiting waiting(watchdog_.get());
  const double cost = TakeCost();
  const double seconds = log_timer_.Seconds();
  const RankProgress own = OwnRecord(cost, seconds, elapsed);
  const float rate = own.words_per_second;
  std::vector<float> rates(ranks_, rate);
  int64_t sentences = state_.sentences * ranks_;
  std::vector<RankProgress> records;  // rank 0: the lines for metrics.jsonl
  if (coordinator_) {
    coordinator_->Collect();
    rates = coordinator_->Rates(rate);
    sentences = coordinator_->Sentences(state_.sentences);
    for (const AsyncCoordinator::Progress& p : coordinator_->TakeNewReports())
      if (p.words > 0) records.push_back(p.record);  // a last report after a regular one: none
  } else if (ranks_ > 1) {
    // Sync ranks are all here: each sends rank 0 its record (a small message that never waits).
    if (rank_ != 0) {
      const std::string bytes = EncodeRankProgress(own);
      comm_->Send(0, AsyncCoordinator::kTagSyncRecord, bytes.data(), bytes.size());
    } else {
      sentences = state_.sentences;
      std::string bytes;
      for (int r = 1; r < ranks_; ++r) {
        comm_->Recv(r, AsyncCoordinator::kTagSyncRecord, &bytes);
        records.push_back(DecodeRankProgress(bytes));
        rates[r] = records.back().words_per_second;
        sentences += records.back().sentences;
      }
    }
  }
  if (rank_ == 0) {
    records.insert(records.begin(), own);
    for (const RankProgress& record : records) metrics_->Append(MetricsLine(record));
    ProgressRecord r;
    r.epoch = state_.epoch + 1;
    r.update = state_.update;
    r.sentences = sentences;
    r.cost_per_word = cost / std::max<int64_t>(words_since_log_, 1);
    r.elapsed_seconds = elapsed;
    r.words_per_second = rates;
    r.learning_rate = last_lr_;
    if (settings_.options.drop_rate > 0) r.sent_fraction = sent_fraction_;
    if (loss_scaler_) {
      r.loss_scale = loss_scaler_->scale();
      r.skipped_steps = loss_scaler_->skipped();
    }
    std::printf("%s\n", ProgressLine(r).c_str());
    std::fflush(stdout);
  }
  words_since_log_ = 0;
  log_timer_.Reset();
}

bool Run::Validate() {
  // Rank 0 validates; sync ranks wait for it (async followers train on).
  Watchdog::Waiting waiting(watchdog_.get());
  FlushStrategy();
  const std::pair<int64_t, int64_t> job = JobCounts();
  bool stop = false;
  if (rank_ == 0) {
    ValidationResult r;
    WithSmoothedParams([&] { r = validator_->Run(*model_, params_, &arena_, HostParams()); });
    const bool better = state_.Improves(r.cross_entropy);
    if (better) {
      state_.best_valid = r.cross_entropy;
      state_.stalls = 0;
    } else {
      ++state_.stalls;
    }
    ValidationRecord v;
    v.epoch = state_.epoch + 1;
    v.update = state_.update;
    v.cross_entropy = r.cross_entropy;
    v.new_best = better;
    v.stalls = state_.stalls;
    if (r.has_bleu) {
      v.bleu = r.bleu;
      v.chrf = r.chrf;
    }
    v.translation_seconds = r.seconds;
    v.elapsed_seconds = time_offset_ + timer_.Seconds();
    v.sentences = job.first;
    v.target_words = job.second;
    if (plan_.has_staleness()) {
      const ps::StalenessHistogram h = strategy_->stats().staleness;
      v.staleness = h.ToString();
      v.staleness_summary = SummarizeStaleness(h);
    }
    for (const std::string& line : ValidationLines(v)) std::printf("%s\n", line.c_str());
    metrics_->Append(MetricsLine(v));
    std::fflush(stdout);
    const int patience = config_.training().early_stopping();
    stop = patience > 0 && state_.stalls >= patience;
  }
  // Every rank learns whether validation stalled (the cyclic schedule restarts on all).
  char stalled = state_.stalls > 0 ? 1 : 0;
  if (coordinator_ && stalled) coordinator_->Send(AsyncCoordinator::Order::kStalled);
  if (ranks_ > 1 && !coordinator_) comm_->Broadcast(&stalled, 1, 0);
  if (stalled) OnValidationStalled();
  return RootDecides(stop);
}

void Run::OnValidationStalled() {
  schedule_.OnValidationStalled(state_.update);
  state_.cycle_start = schedule_.cycle_start();
}

void Run::Save() {
  Watchdog::Waiting waiting(watchdog_.get());
  Timer t;
  FlushStrategy();
  // Every rank: sync ranks hold the same values and stop together.
  divergence_.CheckParametersFinite(HostParams(), state_.update);
  state_.elapsed_seconds = time_offset_ + timer_.Seconds();
  state_.cycle_start = schedule_.cycle_start();
  if (loss_scaler_) {
    state_.loss_scale = loss_scaler_->scale();
    state_.loss_scale_good_steps = loss_scaler_->good_steps();
  }
  std::optional<Checkpoint> gathered = GatherCheckpoint(
      comm_, {strategy_->SaveShardState(), strategy_->SaveWorkerState(), data_->SaveState()});
  if (rank_ != 0) return;
  Checkpoint& c = *gathered;
  c.state = state_;
  c.params = HostValues();
  if (smoother_.average().defined()) {
    c.smoothed = Tensor::Empty(c.params.shape());
    Copy(smoother_.average(), c.smoothed);
  }
  c.config_text = config::ToText(config_);
  c.vocab_bytes = data_->vocab().serialized();
  c.config_hash = config::ConfigHash(config_);
  SaveCheckpoint(options_.model_dir, c, config_.training().keep_checkpoints());
  divergence_.Saved(state_.update);
  // model.tern from the checkpoint's host copy of the average, when there is one.
  const bool exported =
      validator_->ExportModel(HostParams(), c.smoothed.defined() ? c.smoothed : c.params,
                              options_.model_dir + "/model.tern");
  LOG(INFO) << "[training] saved checkpoint-" << state_.update
            << (exported ? " and model.tern" : "") << " in " << t.Seconds() << "s";
}

TrainResult Run::Go() {
  Setup();
  Resume();
  const config::TrainingConfig& t = config_.training();
  const Budget& budget = options_.budget;
  if (budget.unlimited() && rank_ == 0)
    LOG(WARNING) << "[training] no budget (--after) given: training until early stopping";
  // The state is rank 0's on every rank after Resume, so every rank agrees here.
  bool stop = budget.updates > 0 && state_.update >= budget.updates;
  if (plan_.led_by_rank0()) coordinator_ = std::make_unique<AsyncCoordinator>(comm_);
  // From here on a stop signal ends the run with a checkpoint; before, it ends it at once
  // (nothing to lose yet).
  if (options_.stop_on_signals) CatchStopSignals({SIGTERM, SIGUSR1});
  data::Batch batch;
  while (!stop) {
    if (!data_->Next(&batch, &state_.epoch)) break;
    models::BatchTensors tensors = uploader_.Upload(batch, &arena_);
    Step(tensors, batch.target_tokens);
    state_.sentences += batch.batch_size;
    state_.target_words += batch.target_tokens;
    words_since_log_ += batch.target_tokens;
    const double elapsed = time_offset_ + timer_.Seconds();
    const bool log_point = state_.update % t.disp_freq() == 0;
    if (coordinator_ && rank_ != 0) {
      stop = Follow(log_point);
      continue;
    }
    // Sync: update budgets are the same on every rank; time and epochs are decided by rank 0 at
    // the log points (a collective), so every rank stops after the same update. Async on
    // several ranks: rank 0 judges the budget on its own and leads the others.
    stop = budget.updates > 0 && state_.update >= budget.updates;
    if (log_point) stop |= RootDecides(budget.Reached(elapsed, state_.update, state_.epoch));
    // Time is short after a stop signal: the checkpoint, but no validation.
    const bool signalled = StopSignalled();
    stop |= signalled;
    if (coordinator_ && stop) StopFollowers();
    if (log_point || stop) {
      Log(elapsed);
      if (RootDecides(rank_ == 0 && divergence_.Diverged())) divergence_.Fail(rank_);
    }
    if (validate_ && !signalled && (state_.update % t.valid_freq() == 0 || stop)) {
      const bool early = Validate();
      if (coordinator_ && early && !stop) StopFollowers();
      stop |= early;
    }
    if (state_.update % t.save_freq() == 0 || stop) {
      if (coordinator_ && !stop) coordinator_->Send(AsyncCoordinator::Order::kSave);
      Save();
    }
  }
  {
    Watchdog::Waiting waiting(watchdog_.get());
    strategy_->Finish();
  }
  watchdog_.reset();
  if (coordinator_ && rank_ == 0) {  // the followers' last reports, after the last log point
    for (const AsyncCoordinator::Progress& p : coordinator_->TakeNewReports())
      if (p.words > 0) metrics_->Append(MetricsLine(p.record));
  }
  if (rank_ == 0)
    LOG(INFO) << "[training] " << (stopped_by_signal_ ? "stopped early" : "finished") << " after "
              << state_.update << " updates"
              << (coordinator_ ? " of rank 0 (" + coordinator_->FollowerUpdates() + ")" : "")
              << ", "
              << WithCommas(coordinator_ ? coordinator_->Sentences(state_.sentences)
                                         : state_.sentences * ranks_)
              << " sentences";
  return {state_.update, stopped_by_signal_};
}

}  // namespace

void CheckConfig(const config::TrainConfig& config) {
  ps::ReadDistributedSettings(config);
  optim::Schedule schedule(config.optim());
  Budget::Parse(config.training().after());
}

TrainResult Train(const config::TrainConfig& config, const TrainerOptions& options) {
  CHECK(options.comm != nullptr) << "TrainerOptions::comm is required";
  // Two runs in one directory would interleave their checkpoints and metrics. Rank 0 writes
  // them, so it holds the lock; a second run's rank 0 stops here, before anything is written.
  std::optional<DirLock> lock;
  if (options.comm->rank() == 0)
    lock.emplace(options.model_dir, "stop it, or train into another --model-dir");
  if (config.distributed().virtual_workers() > 0) return TrainVirtual(config, options);
  Run run(config, options);
  return run.Go();
}

}  // namespace tern::trainer
