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
#include "trainer/precision_choice.h"
#include "trainer/progress_log.h"
#include "trainer/run.h"
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

}  // namespace

Run::Run(const config::TrainConfig& config, const TrainerOptions& options)
    : config_(config),
      options_(options),
      comm_(options.comm),
      rank_(options.comm->rank()),
      ranks_(options.comm->size()),
      device_(TrainingDevice(config)),
      host_copy_(device_ != Device::kCpu || options.host_copy),
      settings_(ps::ReadDistributedSettings(config)),
      schedule_(config.optim()) {}

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
  if (config_.training().precision() == "auto") ResolvePrecision();
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

// Rank 0 chooses and every rank takes its answer, so the ranks' configs stay equal; the
// checkpoints and config.pbtxt hold the precision that ran. A resumed run keeps its checkpoint's
// where this machine runs it natively, so that it computes as the unbroken run would have.
void Run::ResolvePrecision() {
  int bf16 = 0;
  PrecisionChoice choice;
  if (rank_ == 0) {
    const std::string saved = LatestCheckpointPrecision(options_.model_dir);
    if (saved == "float32" || (saved == "bf16" && NativeProductInputs(device_, DType::kBFloat16)))
      choice = {saved, "the checkpoint's, which this run resumes"};
    else
      choice = ResolveAutoPrecision(config_, device_);
    bf16 = choice.precision == "bf16" ? 1 : 0;
    LOG(INFO) << "[training] training.precision auto: " << choice.precision << " (" << choice.why
              << ")";
  }
  comm_->Broadcast(&bf16, sizeof(bf16), 0);
  config_.mutable_training()->set_precision(bf16 ? "bf16" : "float32");
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
      metrics_->Append(MetricsLine(
          StartRecord{0, 0, ranks_, ProductsName(config_.training().precision(), device_)}));
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
    metrics_->Append(
        MetricsLine(StartRecord{state_.update, state_.elapsed_seconds, ranks_,
                                ProductsName(config_.training().precision(), device_)}));
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
  // same collective tells every sync rank whether any has caught a stop signal (sync local SGD's
  // ranks too, which meet only every local_steps updates otherwise).
  float shared[2] = {static_cast<float>(target_words),
                     options_.stop_on_signals && StopSignal() != 0 ? 1.f : 0.f};
  if (plan_.ranks_meet_every_update()) {
    Watchdog::Waiting waiting(watchdog_.get());
    comm_->AllReduceSum(Tensor(shared, Shape{2}));
  }
  // Local SGD's inner steps are each rank's own: the mean over its own words.
  const float words = settings_.options.local_sgd ? static_cast<float>(target_words) : shared[0];
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

bool Run::Validate() {
  // Rank 0 validates; sync ranks wait for it (async followers train on).
  Watchdog::Waiting waiting(watchdog_.get());
  FlushStrategy();
  const std::pair<int64_t, int64_t> job = JobCounts();
  bool stop = false;
  if (rank_ == 0) {
    ValidationResult r;
    bool better = false;
    WithSmoothedParams([&] {
      r = validator_->Run(*model_, params_, &arena_, HostParams());
      better = state_.Improves(r.cross_entropy);
      // The best model so far (what was validated), for whoever wants it rather than the last.
      if (better)
        validator_->ExportModel(HostParams(), HostParams().values_flat(),
                                options_.model_dir + "/model.best.tern");
    });
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
