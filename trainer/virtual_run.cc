// Training with virtual workers (see virtual_run.h).
#include "trainer/virtual_run.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "common/stop_signal.h"
#include "common/timer.h"
#include "configs/config_io.h"
#include "graph/graph.h"
#include "graph/params.h"
#include "models/model.h"
#include "optim/schedule.h"
#include "ps/plan.h"
#include "ps/virtual_cluster.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "tensor/threads.h"
#include "trainer/batch_gradients.h"
#include "trainer/checkpoint.h"
#include "trainer/divergence.h"
#include "trainer/metrics_log.h"
#include "trainer/precision_choice.h"
#include "trainer/progress_log.h"
#include "trainer/smoothing.h"
#include "trainer/training_data.h"
#include "trainer/validator.h"

namespace tern::trainer {
namespace {

// One virtual worker's side of the trainer: its data, schedule and counters.
struct Worker {
  std::unique_ptr<TrainingData> data;
  std::unique_ptr<optim::Schedule> schedule;
  int64_t update = 0, epoch = 0, sentences = 0, target_words = 0;
  double cost_sum = 0;  // since its last record
  int64_t words_since_record = 0;
  double record_time = 0;  // simulated seconds of its last record
  float rate = 0;          // words/s over its last record's interval
  float learning_rate = 0;
  data::Batch batch;  // sync: its batch of the mini-batch under way
};

// Virtual workers run float32: "auto" (the default) is float32 here, in checkpoints too.
config::TrainConfig Float32WhenAuto(config::TrainConfig config) {
  if (config.training().precision() == "auto") config.mutable_training()->set_precision("float32");
  return config;
}

class VirtualRun {
 public:
  VirtualRun(const config::TrainConfig& config, const TrainerOptions& options)
      : config_(Float32WhenAuto(config)),
        options_(options),
        settings_(ps::ReadDistributedSettings(config)),
        workers_(settings_.virtual_workers.workers) {}

  TrainResult Go();

 private:
  void Setup();
  // Worker w's next mini-batch gradient, handed to the cluster; false when its data ran out.
  bool Compute(int w);
  // The progress record of worker w at simulated time `time`, which starts its next interval.
  RankProgress Record(int w, double time);
  void Log(double time);
  bool Validate(double time);  // true when early stopping ends the run
  void Save(double time);

  const config::TrainConfig config_;
  const TrainerOptions options_;
  const ps::DistributedSettings settings_;
  std::vector<Worker> workers_;
  std::unique_ptr<ps::VirtualCluster> cluster_;
  std::unique_ptr<models::Model> model_;
  graph::ParamStore params_;
  // Worker 0's view of the parameters, averaged after each of its updates (as rank 0 of a real
  // run averages its own); validation and model.tern use it.
  ParamSmoother smoother_{config_.optim().exponential_smoothing()};
  Arena arena_{Device::kCpu};
  BatchUploader uploader_;
  graph::Graph graph_{&arena_, /*training=*/true};
  std::unique_ptr<Validator> validator_;
  std::unique_ptr<MetricsLog> metrics_;
  // Worker 0's costs: a run of non-finite ones stops the run, as the training loop's do.
  DivergenceWatch divergence_{config_, Device::kCpu};
  double best_valid_ = 0;
  int64_t stalls_ = 0;
};

void VirtualRun::Setup() {
  const int n = static_cast<int>(workers_.size());
  if (options_.comm->size() != 1)
    Fail("distributed.virtual_workers: ", n,
         " workers run in one process; start tern-train "
         "without mpirun (this job has ",
         options_.comm->size(), " ranks)");
  if (config_.training().device() != "cpu")
    Fail("distributed.virtual_workers: runs on the CPU only (training.device: cpu)");
  const std::string& precision = config_.training().precision();
  if (precision != "float32" && precision != "bf16")
    Fail("distributed.virtual_workers: runs in float32 or bf16 (training.precision: ", precision,
         "; use float32, bf16 or auto)");
  if (precision == "bf16") {
    graph_.set_matmul_inputs(DType::kBFloat16);
    if (!NativeProductInputs(Device::kCpu, DType::kBFloat16))
      LOG(WARNING) << "[training] training.precision: bf16 on this CPU rounds the operands in "
                      "software, more slowly than float32 (it runs in hardware with AVX512-BF16)";
  }
  SetComputeThreads(config_.training().threads() > 0 ? config_.training().threads()
                                                     : DefaultComputeThreads());
  MakeDirs(options_.model_dir);
  if (FileExists(options_.model_dir + "/checkpoint.latest"))
    Fail(options_.model_dir, ": holds a checkpoint; a run of virtual workers does not resume ",
         "(use a new --model-dir, or remove the old one)");
  for (int w = 0; w < n; ++w) {
    workers_[w].data = std::make_unique<TrainingData>(config_, options_.model_dir, w, n);
    workers_[w].schedule = std::make_unique<optim::Schedule>(config_.optim());
    workers_[w].data->Start("");
  }
  model_ = models::CreateModel(config_.model(), workers_[0].data->vocab().size());
  model_->AddParams(&params_);
  params_.Finalize(Device::kCpu, config_.training().seed());
  cluster_ = std::make_unique<ps::VirtualCluster>(settings_.algorithm, settings_.options,
                                                  settings_.virtual_workers, config_.optim(),
                                                  params_.total_size());
  cluster_->Init(params_.values_flat().f32());
  validator_ = std::make_unique<Validator>(config_, workers_[0].data->vocab());
  metrics_ = std::make_unique<MetricsLog>(options_.model_dir + "/metrics.jsonl");
  metrics_->Clear();
  metrics_->Append(MetricsLine(
      StartRecord{0, 0, n, ProductsName(config_.training().precision(), Device::kCpu)}));
  const ps::VirtualOptions& v = settings_.virtual_workers;
  LOG(INFO) << "[training] " << n << " virtual " << settings_.algorithm << " workers, "
            << (settings_.options.local_sgd ? "local SGD, local steps " : "tau ")
            << settings_.options.tau << "; simulated time: "
            << (v.seconds_per_token > 0 ? std::to_string(v.seconds_per_token) + " s per token"
                                        : std::string("each mini-batch's measured CPU time"))
            << ", links "
            << (v.link_bytes_per_second > 0
                    ? std::to_string(v.link_bytes_per_second * 8 / 1e6) + " Mbit/s"
                    : std::string("unlimited"))
            << " with " << v.link_delay_seconds * 1e3 << " ms delay"
            << (v.slowdown > 1 ? ", the last worker " + std::to_string(v.slowdown) + "x slower"
                               : std::string());
  WriteFileAtomic(options_.model_dir + "/config.pbtxt", config::ToText(config_));
}

bool VirtualRun::Compute(int w) {
  Worker& k = workers_[w];
  const bool sync = settings_.algorithm == "sync";
  const int n = static_cast<int>(workers_.size());
  float words = 0;
  if (!sync) {
    if (!k.data->Next(&k.batch, &k.epoch)) return false;
    words = static_cast<float>(k.batch.target_tokens);
  } else {
    // Sync: the loss is normalized by every worker's words of this mini-batch (as the ranks'
    // all-reduce of the word count does), so worker 0 draws all the workers' batches.
    if (w == 0) {
      for (Worker& other : workers_)
        if (!other.data->Next(&other.batch, &other.epoch)) return false;
    }
    for (int v = 0; v < n; ++v) words += static_cast<float>(workers_[v].batch.target_tokens);
    // Local SGD's inner steps are each worker's own: the mean over its own words.
    if (settings_.options.local_sgd) words = static_cast<float>(k.batch.target_tokens);
  }
  const data::Batch& batch = k.batch;
  // The worker's copy of the parameters, and the cluster's buffer for its gradient, as the
  // store's own for this mini-batch (no copy in or out).
  params_.Borrow(cluster_->params(w), cluster_->gradient_buffer(w));
  // The dropout seed of rank w at this update (Run::Step's).
  graph_.Clear((config_.training().seed() * 1000003ull + static_cast<uint64_t>(k.update)) *
                   1009ull +
               static_cast<uint64_t>(w));
  const double cpu = ProcessCpuSeconds();
  models::BatchTensors tensors = uploader_.Upload(batch, &arena_);
  graph::Var loss =
      BatchGradients(graph_, *model_, params_, tensors, config_.optim().label_smoothing(), words);
  const double measured = ProcessCpuSeconds() - cpu;
  const float cost = loss.value().ToVector()[0];
  k.cost_sum += cost;
  k.update += 1;
  if (w == 0) divergence_.AddHostCost(cost, k.update);
  ps::StepInfo info;
  info.update = k.update;
  info.options = k.schedule->Options(k.update, batch.target_tokens);
  k.learning_rate = info.options.learning_rate;
  const double per_token = settings_.virtual_workers.seconds_per_token;
  const double seconds =
      per_token > 0 ? per_token * batch.batch_size * (batch.src_len + batch.tgt_len) : measured;
  cluster_->Submit(w, params_.grads_flat().f32(), seconds, info);
  params_.Restore();
  k.sentences += batch.batch_size;
  k.target_words += batch.target_tokens;
  k.words_since_record += batch.target_tokens;
  arena_.Reset();
  return true;
}

RankProgress VirtualRun::Record(int w, double time) {
  Worker& k = workers_[w];
  RankProgress r;
  r.rank = w;
  r.update = k.update;
  r.epoch = k.epoch + 1;
  r.elapsed_seconds = time;
  r.sentences = k.sentences;
  r.target_words = k.target_words;
  r.cost_per_word = k.cost_sum / std::max<int64_t>(k.words_since_record, 1);
  r.learning_rate = k.learning_rate;
  k.rate = static_cast<float>(k.words_since_record / std::max(time - k.record_time, 1e-9));
  r.words_per_second = k.rate;
  const ps::VirtualCluster::WorkerStats s = cluster_->stats(w);
  if (settings_.options.drop_rate > 0) r.sent_fraction = s.sent_fraction;
  r.staleness = SummarizeStaleness(cluster_->staleness(w));
  r.bytes_pushed = s.bytes_pushed;
  r.bytes_pulled = s.bytes_pulled;
  r.cpu_seconds = ProcessCpuSeconds();
  k.cost_sum = 0;
  k.words_since_record = 0;
  k.record_time = time;
  return r;
}

void VirtualRun::Log(double time) {
  const RankProgress own = Record(0, time);
  metrics_->Append(MetricsLine(own));
  ProgressRecord p;
  p.epoch = own.epoch;
  p.update = own.update;
  for (const Worker& k : workers_) {
    p.sentences += k.sentences;
    p.words_per_second.push_back(k.rate);
  }
  p.cost_per_word = own.cost_per_word;
  p.elapsed_seconds = time;
  p.learning_rate = own.learning_rate;
  if (own.sent_fraction) p.sent_fraction = own.sent_fraction;
  std::printf("%s\n", ProgressLine(p).c_str());
  std::fflush(stdout);
}

bool VirtualRun::Validate(double time) {
  cluster_->ReadGlobal(params_.values_flat().f32());
  if (smoother_.average().defined()) Copy(smoother_.average(), params_.values_flat());
  ValidationResult r = validator_->Run(*model_, params_, &arena_, params_);
  arena_.Reset();
  const bool better = best_valid_ == 0 || r.cross_entropy < best_valid_;
  if (better) {
    validator_->ExportModel(params_, params_.values_flat(),
                            options_.model_dir + "/model.best.tern");
    best_valid_ = r.cross_entropy;
    stalls_ = 0;
  } else {
    ++stalls_;
  }
  const Worker& lead = workers_[0];
  ValidationRecord v;
  v.epoch = lead.epoch + 1;
  v.update = lead.update;
  v.cross_entropy = r.cross_entropy;
  v.new_best = better;
  v.stalls = stalls_;
  if (r.has_bleu) {
    v.bleu = r.bleu;
    v.chrf = r.chrf;
  }
  v.translation_seconds = r.seconds;
  v.elapsed_seconds = time;
  for (const Worker& k : workers_) {
    v.sentences += k.sentences;
    v.target_words += k.target_words;
  }
  const ps::StalenessHistogram h = cluster_->staleness(0);
  v.staleness = h.ToString();
  v.staleness_summary = SummarizeStaleness(h);
  for (const std::string& line : ValidationLines(v)) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  metrics_->Append(MetricsLine(v));
  if (!better) {  // every worker's cyclic schedule restarts, as rank 0's order makes them
    for (Worker& k : workers_) k.schedule->OnValidationStalled(k.update);
  }
  const int patience = config_.training().early_stopping();
  return patience > 0 && stalls_ >= patience;
}

void VirtualRun::Save(double time) {
  const int n = static_cast<int>(workers_.size());
  const Worker& lead = workers_[0];
  Checkpoint c;
  c.state.update = lead.update;
  c.state.epoch = lead.epoch;
  c.state.sentences = lead.sentences;
  c.state.target_words = lead.target_words;
  c.state.best_valid = best_valid_;
  c.state.stalls = stalls_;
  c.state.cycle_start = lead.schedule->cycle_start();
  c.state.elapsed_seconds = time;
  cluster_->ReadGlobal(params_.values_flat().f32());
  c.params = params_.values_flat();
  for (int w = 0; w < n; ++w) {
    c.shard_states.push_back(cluster_->SaveShardState(w));
    c.worker_states.push_back(cluster_->SaveWorkerState(w));
    c.data_states.push_back(workers_[w].data->SaveState());
  }
  c.config_text = config::ToText(config_);
  c.vocab_bytes = lead.data->vocab().serialized();
  c.config_hash = config::ConfigHash(config_);
  c.smoothed = smoother_.average();
  SaveCheckpoint(options_.model_dir, c, config_.training().keep_checkpoints());
  const bool exported = validator_->ExportModel(
      params_, c.smoothed.defined() ? c.smoothed : c.params, options_.model_dir + "/model.tern");
  LOG(INFO) << "[training] saved checkpoint-" << lead.update << (exported ? " and model.tern" : "");
}

TrainResult VirtualRun::Go() {
  Setup();
  const config::TrainingConfig& t = config_.training();
  const Budget& budget = options_.budget;
  const bool validate = !config_.data().valid_src().empty() &&
                        !config_.data().valid_tgt().empty() && t.valid_freq() > 0;
  if (budget.unlimited())
    LOG(WARNING) << "[training] no budget (--after) given: training until early stopping";
  // A stop signal ends the run at worker 0's next step, with the validation and checkpoint a
  // budget's end has (a sweep stops a run that reached its target this way).
  if (options_.stop_on_signals) CatchStopSignals({SIGTERM, SIGUSR1});
  bool signalled = false;
  bool stopped_early = false;  // by training.early_stopping, at a validation
  double now = 0;
  for (bool stop = false; !stop;) {
    const ps::VirtualCluster::Event e = cluster_->Next();
    if (e.kind == ps::VirtualCluster::Event::Kind::kComputeGradient) {
      if (!Compute(e.worker)) break;  // the data ended (an epoch budget)
      continue;
    }
    const int w = e.worker;
    now = e.time;
    Worker& k = workers_[w];
    if (w == 0 && smoother_.active()) {
      const Tensor view(const_cast<float*>(cluster_->params(0)), Shape{params_.total_size()});
      smoother_.Update(view, k.update);
    }
    if (w != 0) {
      if (k.update % t.disp_freq() == 0) metrics_->Append(MetricsLine(Record(w, now)));
      continue;
    }
    signalled = options_.stop_on_signals && StopSignal() != 0;
    stop = signalled || budget.Reached(now, k.update, k.epoch) ||
           (budget.updates > 0 && k.update >= budget.updates);
    if (signalled)
      LOG(WARNING) << "[training] " << SignalName(StopSignal()) << ": stopping after update "
                   << k.update << " of worker 0";
    if (divergence_.Diverged()) divergence_.Fail(0);
    if (k.update % t.disp_freq() == 0 || stop) Log(now);
    if (validate && !stop && k.update % t.valid_freq() == 0) stop = stopped_early = Validate(now);
  }
  // The other workers' last records, then every push under way lands before the last look.
  for (int w = 1; w < static_cast<int>(workers_.size()); ++w)
    if (workers_[w].words_since_record > 0) metrics_->Append(MetricsLine(Record(w, now)));
  cluster_->Finish();
  // No checkpoint (nor its validation) of a model that holds NaN or infinity.
  cluster_->ReadGlobal(params_.values_flat().f32());
  divergence_.CheckParametersFinite(params_, workers_[0].update);
  // (Not again after the validation that stopped it: that would count one more stall.)
  if (validate && !stopped_early) Validate(now);
  Save(now);
  const Worker& lead = workers_[0];
  int64_t sentences = 0;
  std::string others;
  for (size_t w = 0; w < workers_.size(); ++w) {
    sentences += workers_[w].sentences;
    if (w > 0)
      others += (w > 1 ? ", worker " : "worker ") + std::to_string(w) + ": " +
                std::to_string(workers_[w].update);
  }
  LOG(INFO) << "[training] finished after " << lead.update << " updates of worker 0"
            << (others.empty() ? "" : " (" + others + ")") << ", " << WithCommas(sentences)
            << " sentences, " << now << " simulated seconds";
  return {lead.update, signalled};
}

}  // namespace

TrainResult TrainVirtual(const config::TrainConfig& config, const TrainerOptions& options) {
  VirtualRun run(config, options);
  return run.Go();
}

}  // namespace tern::trainer
