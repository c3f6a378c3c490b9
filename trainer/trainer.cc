#include "trainer/trainer.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "common/timer.h"
#include "configs/config_io.h"
#include "graph/graph.h"
#include "graph/params.h"
#include "models/model.h"
#include "optim/clip.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "tensor/threads.h"
#include "trainer/checkpoint.h"
#include "trainer/training_data.h"
#include "trainer/validator.h"

namespace tern::trainer {
namespace {

std::string WithCommas(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

// Everything one training run holds.
class Run {
 public:
  Run(const config::TrainConfig& config, const TrainerOptions& options)
      : config_(config), options_(options), schedule_(config.optim()) {}

  int64_t Go();

 private:
  void Setup();
  void Resume();
  void Step(const models::BatchTensors& batch, int64_t target_words);
  void Log(double elapsed);
  bool Validate();  // returns true when training should stop early
  void Save();

  config::TrainConfig config_;
  TrainerOptions options_;
  optim::Schedule schedule_;
  std::unique_ptr<TrainingData> data_;
  std::unique_ptr<models::Model> model_;
  graph::ParamStore params_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<Validator> validator_;
  Arena arena_;
  TrainingState state_;
  Timer timer_;
  double time_offset_ = 0;  // elapsed seconds before this process (resume)
  // Since the last log line.
  double cost_sum_ = 0;
  int64_t words_since_log_ = 0, sentences_since_log_ = 0, updates_since_log_ = 0;
  Timer log_timer_;
  float last_lr_ = 0;
};

void Run::Setup() {
  SetComputeThreads(config_.training().threads() > 0 ? config_.training().threads()
                                                     : DefaultComputeThreads());
  MakeDirs(options_.model_dir);
  data_ = std::make_unique<TrainingData>(config_, options_.model_dir, options_.rank,
                                         options_.world_size);
  model_ = models::CreateModel(config_.model(), data_->vocab().size());
  model_->AddParams(&params_);
  params_.Finalize(Device::kCpu, config_.training().seed());
  optimizer_ = optim::MakeOptimizer(config_.optim(), params_.total_size());
  validator_ = std::make_unique<Validator>(config_, data_->vocab());
  int64_t count = 0;
  for (int i = 0; i < params_.size(); ++i) count += params_.info(i).shape.numel();
  LOG(INFO) << "[model] " << config_.model().arch() << ": " << params_.size() << " tensors, "
            << WithCommas(count) << " parameters; vocabulary " << data_->vocab().size();
  WriteFileAtomic(options_.model_dir + "/config.pbtxt", config::ToText(config_));
}

void Run::Resume() {
  std::optional<Checkpoint> c = LoadLatestCheckpoint(options_.model_dir);
  if (!c) {
    data_->Start("");
    return;
  }
  if (c->params.numel() != params_.total_size())
    Fail(options_.model_dir, ": the checkpoint holds ", c->params.numel(),
         " parameter values but this config's model has ", params_.total_size(),
         "; use the config it was trained with or a new --model-dir");
  if (c->vocab_bytes != data_->vocab().serialized())
    Fail(options_.model_dir, ": the checkpoint's vocabulary differs from data.vocab; ",
         "use the vocabulary it was trained with or a new --model-dir");
  Copy(c->params, params_.values_flat());
  optimizer_->LoadState(c->optimizer_state);
  state_ = c->state;
  schedule_.set_cycle_start(state_.cycle_start);
  data_->Start(state_.data_state);
  time_offset_ = state_.elapsed_seconds;
  LOG(INFO) << "[training] resumed from update " << state_.update << " (epoch " << state_.epoch + 1
            << ")";
}

void Run::Step(const models::BatchTensors& batch, int64_t target_words) {
  graph::Graph g(&arena_, /*training=*/true,
                 config_.training().seed() * 1000003ull + static_cast<uint64_t>(state_.update));
  params_.ZeroGrads();
  graph::Var loss = models::TokenLoss(g, model_->Logits(g, params_, batch), batch.tgt_out,
                                      config_.optim().label_smoothing());
  // Mean over target words: gradients of batches of any size are on one scale.
  g.Backward(loss, 1.f / static_cast<float>(std::max<int64_t>(target_words, 1)));
  cost_sum_ += loss.value().at(0);

  const int64_t update = state_.update + 1;
  optim::StepOptions step = schedule_.Options(update, target_words);
  const float clip = config_.optim().clip_norm();
  if (clip > 0) step.grad_scale = optim::ClipScale(optim::SquaredNorm(params_.grads_flat()), clip);
  optimizer_->Step(params_.values_flat(), params_.grads_flat(), step);
  last_lr_ = step.learning_rate;
  arena_.Reset();
  state_.update = update;
}

void Run::Log(double elapsed) {
  const double seconds = log_timer_.Seconds();
  std::printf("Ep. %lld : Up. %lld : Sen. %s : Cost %.8f : Time %.2fs : %.2f words/s : L.r. %.4e\n",
              static_cast<long long>(state_.epoch + 1), static_cast<long long>(state_.update),
              WithCommas(state_.sentences).c_str(),
              cost_sum_ / std::max<int64_t>(words_since_log_, 1), elapsed,
              words_since_log_ / std::max(seconds, 1e-9), last_lr_);
  std::fflush(stdout);
  cost_sum_ = 0;
  words_since_log_ = sentences_since_log_ = updates_since_log_ = 0;
  log_timer_.Reset();
}

bool Run::Validate() {
  ValidationResult r = validator_->Run(*model_, params_, &arena_);
  const bool better = state_.best_valid == 0 || r.cross_entropy < state_.best_valid;
  if (better) {
    state_.best_valid = r.cross_entropy;
    state_.stalls = 0;
  } else {
    ++state_.stalls;
    schedule_.OnValidationStalled(state_.update);
    state_.cycle_start = schedule_.cycle_start();
  }
  std::printf(
      "Ep. %lld : Up. %lld : valid ce-mean-words : %.5f : %s\n",
      static_cast<long long>(state_.epoch + 1), static_cast<long long>(state_.update),
      r.cross_entropy,
      better ? "new best" : ("stalled " + std::to_string(state_.stalls) + " times").c_str());
  if (r.has_bleu)
    std::printf("Ep. %lld : Up. %lld : valid bleu : %.2f : chrf : %.2f : time %.1fs\n",
                static_cast<long long>(state_.epoch + 1), static_cast<long long>(state_.update),
                r.bleu, r.chrf, r.seconds);
  std::fflush(stdout);
  const int patience = config_.training().early_stopping();
  return patience > 0 && state_.stalls >= patience;
}

void Run::Save() {
  if (options_.rank != 0) return;
  Timer t;
  state_.elapsed_seconds = time_offset_ + timer_.Seconds();
  state_.data_state = data_->SaveState();
  state_.cycle_start = schedule_.cycle_start();
  Checkpoint c;
  c.state = state_;
  c.params = params_.values_flat();
  c.optimizer_state = optimizer_->SaveState();
  c.config_text = config::ToText(config_);
  c.vocab_bytes = data_->vocab().serialized();
  c.config_hash = config::ConfigHash(config_);
  SaveCheckpoint(options_.model_dir, c, config_.training().keep_checkpoints());
  validator_->ExportModel(params_, options_.model_dir + "/model.tern");
  LOG(INFO) << "[training] saved checkpoint-" << state_.update << " and model.tern in "
            << t.Seconds() << "s";
}

int64_t Run::Go() {
  Setup();
  Resume();
  const config::TrainingConfig& t = config_.training();
  const Budget& budget = options_.budget;
  if (budget.unlimited())
    LOG(WARNING) << "[training] no budget (--after) given: training until early stopping";
  bool stop = budget.Reached(time_offset_, state_.update, state_.epoch);
  data::Batch batch;
  while (!stop) {
    if (!data_->Next(&batch, &state_.epoch)) break;
    models::BatchTensors tensors = ToTensors(batch, &arena_);
    Step(tensors, batch.target_tokens);
    state_.sentences += batch.batch_size;
    state_.target_words += batch.target_tokens;
    words_since_log_ += batch.target_tokens;
    sentences_since_log_ += batch.batch_size;
    ++updates_since_log_;
    const double elapsed = time_offset_ + timer_.Seconds();
    stop = budget.Reached(elapsed, state_.update, state_.epoch);
    if (state_.update % t.disp_freq() == 0 || stop) Log(elapsed);
    if (validator_->enabled() && (state_.update % t.valid_freq() == 0 || stop)) stop |= Validate();
    if (state_.update % t.save_freq() == 0 || stop) Save();
  }
  LOG(INFO) << "[training] finished after " << state_.update << " updates, "
            << WithCommas(state_.sentences) << " sentences";
  return state_.update;
}

}  // namespace

int64_t Train(const config::TrainConfig& config, const TrainerOptions& options) {
  Run run(config, options);
  return run.Go();
}

}  // namespace tern::trainer
