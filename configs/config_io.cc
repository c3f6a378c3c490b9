#include "configs/config_io.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

namespace tern::config {
namespace {

namespace pb = google::protobuf;

class ErrorCollector : public pb::io::ErrorCollector {
 public:
  explicit ErrorCollector(std::string source) : source_(std::move(source)) {}
  void AddError(int line, int column, const std::string& message) override {
    if (first_.empty())
      first_ = source_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
               message;
  }
  const std::string& first() const { return first_; }

 private:
  std::string source_, first_;
};

bool Check(bool ok, const std::string& message, std::string* error) {
  if (!ok && error->empty()) *error = message;
  return ok;
}

}  // namespace

bool ParseTrainConfig(const std::string& text, const std::string& source, TrainConfig* out,
                      std::string* error) {
  pb::TextFormat::Parser parser;
  ErrorCollector collector(source);
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(text, out)) {
    *error = collector.first().empty() ? source + ": cannot parse config" : collector.first();
    return false;
  }
  return true;
}

bool LoadTrainConfig(const std::string& path, TrainConfig* out, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot open config " + path;
    return false;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseTrainConfig(buffer.str(), path, out, error);
}

bool ApplyOverride(const std::string& assignment, TrainConfig* config, std::string* error) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos) {
    *error = "override '" + assignment + "' is not of the form field.path=value";
    return false;
  }
  const std::string path = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  std::vector<std::string> parts;
  for (size_t s = 0;;) {
    size_t dot = path.find('.', s);
    parts.push_back(path.substr(s, dot == std::string::npos ? std::string::npos : dot - s));
    if (dot == std::string::npos) break;
    s = dot + 1;
  }
  // Walk to the leaf's message in the config, checking every name.
  pb::Message* msg = config;
  const pb::FieldDescriptor* leaf = nullptr;
  for (size_t i = 0; i < parts.size(); ++i) {
    leaf = msg->GetDescriptor()->FindFieldByName(parts[i]);
    bool last = i + 1 == parts.size();
    if (leaf == nullptr || (!last && leaf->message_type() == nullptr) ||
        (last && (leaf->message_type() != nullptr || leaf->is_repeated()))) {
      *error = "unknown config field '" + path + "' in override '" + assignment + "'";
      return false;
    }
    if (!last) msg = msg->GetReflection()->MutableMessage(msg, leaf);
  }
  if (leaf->cpp_type() == pb::FieldDescriptor::CPPTYPE_STRING) {
    std::string quoted = "\"";
    for (char c : value) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    value = quoted + "\"";
  }
  // Parse "leaf: value" into a fresh message of the leaf's parent type, then copy that one field
  // (proto3 MergeFrom would skip a zero value).
  std::unique_ptr<pb::Message> patch(msg->New());
  pb::TextFormat::Parser parser;
  ErrorCollector collector("override '" + assignment + "'");
  parser.RecordErrorsTo(&collector);
  if (!parser.ParseFromString(leaf->name() + ": " + value, patch.get())) {
    *error = collector.first();
    return false;
  }
  const pb::Reflection* from = patch->GetReflection();
  const pb::Reflection* to = msg->GetReflection();
  switch (leaf->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      to->SetInt32(msg, leaf, from->GetInt32(*patch, leaf));
      break;
    case pb::FieldDescriptor::CPPTYPE_INT64:
      to->SetInt64(msg, leaf, from->GetInt64(*patch, leaf));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      to->SetUInt32(msg, leaf, from->GetUInt32(*patch, leaf));
      break;
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      to->SetUInt64(msg, leaf, from->GetUInt64(*patch, leaf));
      break;
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      to->SetFloat(msg, leaf, from->GetFloat(*patch, leaf));
      break;
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      to->SetDouble(msg, leaf, from->GetDouble(*patch, leaf));
      break;
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      to->SetBool(msg, leaf, from->GetBool(*patch, leaf));
      break;
    case pb::FieldDescriptor::CPPTYPE_STRING:
      to->SetString(msg, leaf, from->GetString(*patch, leaf));
      break;
    default:
      *error = "config field '" + path + "' cannot be set by an override";
      return false;
  }
  return true;
}

bool ApplyOverrides(const std::string& list, TrainConfig* config, std::string* error) {
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ';');) {
    if (!item.empty() && !ApplyOverride(item, config, error)) return false;
  }
  return true;
}

void FillDefaults(TrainConfig* c) {
  ModelConfig* m = c->mutable_model();
  if (m->arch().empty()) m->set_arch("transformer");
  const bool rnn = m->arch() == "s2s" || m->arch() == "devlin";
  if (m->emb_dim() == 0) m->set_emb_dim(512);
  if (m->ffn_dim() == 0) m->set_ffn_dim(4 * m->emb_dim());
  if (m->heads() == 0) m->set_heads(8);
  if (m->enc_depth() == 0) m->set_enc_depth(rnn ? 1 : 6);
  if (m->dec_depth() == 0) m->set_dec_depth(rnn ? 1 : 6);
  if (m->rnn_dim() == 0) m->set_rnn_dim(1024);
  if (m->enc_cell_depth() == 0) m->set_enc_cell_depth(1);
  if (m->dec_cell_base_depth() == 0) m->set_dec_cell_base_depth(2);
  if (m->dec_cell_high_depth() == 0) m->set_dec_cell_high_depth(1);
  if (m->fc_depth() == 0) m->set_fc_depth(4);
  if (m->ffn_activation().empty()) m->set_ffn_activation("relu");
  if (m->max_length() == 0) m->set_max_length(256);

  DataConfig* d = c->mutable_data();
  if (d->vocab_size() == 0) d->set_vocab_size(8000);
  if (d->max_length() == 0) d->set_max_length(128);
  if (d->on_bad_line().empty()) d->set_on_bad_line("skip");
  if (d->batch_tokens() == 0) d->set_batch_tokens(2048);
  if (d->maxi_batch() == 0) d->set_maxi_batch(100);
  if (d->prefetch() == 0) d->set_prefetch(4);

  OptimConfig* o = c->mutable_optim();
  if (o->optimizer().empty()) o->set_optimizer("adam");
  if (o->learning_rate() == 0) o->set_learning_rate(3e-4f);
  if (o->beta1() == 0) o->set_beta1(0.9f);
  if (o->beta2() == 0) o->set_beta2(0.98f);
  if (o->epsilon() == 0) o->set_epsilon(1e-9f);
  if (o->schedule().empty()) o->set_schedule("inv_sqrt");
  if (o->reference_words() == 0) o->set_reference_words(2048);

  TrainingConfig* t = c->mutable_training();
  if (t->seed() == 0) t->set_seed(1234);
  if (t->disp_freq() == 0) t->set_disp_freq(50);
  if (t->valid_freq() == 0) t->set_valid_freq(500);
  if (t->save_freq() == 0) t->set_save_freq(500);
  if (t->valid_beam() == 0) t->set_valid_beam(4);
  if (t->device().empty()) t->set_device("cpu");
  if (t->keep_checkpoints() == 0) t->set_keep_checkpoints(1);
  if (t->precision().empty()) t->set_precision("float32");
  if (t->loss_scale() == 0) t->set_loss_scale(65536.f);
  if (t->loss_scale_window() == 0) t->set_loss_scale_window(2000);

  DistributedConfig* x = c->mutable_distributed();
  if (x->strategy().empty()) x->set_strategy("async");
  if (x->tau() == 0) x->set_tau(1);
  if (x->stall_seconds() == 0) x->set_stall_seconds(45);
  if (x->overlap().empty()) x->set_overlap("auto");
}

bool Validate(const TrainConfig& c, std::string* error) {
  error->clear();
  const ModelConfig& m = c.model();
  bool ok = true;
  ok &= Check(
      m.arch() == "transformer" || m.arch() == "aan" || m.arch() == "s2s" || m.arch() == "devlin",
      "model.arch: unknown architecture '" + m.arch() + "' (known: transformer, aan, s2s, devlin)",
      error);
  ok &= Check(m.rnn_dim() > 0, "model.rnn_dim must be > 0", error);
  ok &= Check(m.enc_cell_depth() >= 1 && m.dec_cell_high_depth() >= 1,
              "model.enc_cell_depth/dec_cell_high_depth must be >= 1", error);
  ok &= Check(m.dec_cell_base_depth() >= 2,
              "model.dec_cell_base_depth must be >= 2 (the cGRU has two cells)", error);
  ok &= Check(m.fc_depth() >= 1, "model.fc_depth must be >= 1", error);
  ok &= Check(m.clip_weights() >= 0 && m.clip_relu() >= 0,
              "model.clip_weights/clip_relu must be >= 0 (0 = off)", error);
  ok &= Check(m.rnn_dropout() >= 0 && m.rnn_dropout() < 1, "model.rnn_dropout must be in [0, 1)",
              error);
  ok &= Check(m.emb_dim() > 0 && m.heads() > 0 && m.emb_dim() % m.heads() == 0,
              "model.emb_dim must be a positive multiple of model.heads", error);
  ok &=
      Check(m.enc_depth() > 0 && m.dec_depth() > 0, "model.enc_depth/dec_depth must be > 0", error);
  ok &= Check(m.dropout() >= 0 && m.dropout() < 1, "model.dropout must be in [0, 1)", error);
  ok &= Check(m.attention_dropout() >= 0 && m.attention_dropout() < 1,
              "model.attention_dropout must be in [0, 1)", error);
  ok &= Check(m.ffn_dropout() >= 0 && m.ffn_dropout() < 1, "model.ffn_dropout must be in [0, 1)",
              error);
  ok &= Check(m.ffn_activation() == "relu" || m.ffn_activation() == "gelu",
              "model.ffn_activation must be relu or gelu", error);
  const DataConfig& d = c.data();
  ok &= Check(d.on_bad_line() == "skip" || d.on_bad_line() == "error",
              "data.on_bad_line must be skip or error", error);
  ok &= Check(d.batch_tokens() > 0, "data.batch_tokens must be > 0", error);
  ok &= Check(d.vocab_size() >= 16, "data.vocab_size must be >= 16", error);
  const OptimConfig& o = c.optim();
  ok &= Check(o.optimizer() == "adam" || o.optimizer() == "sgd",
              "optim.optimizer must be adam or sgd", error);
  ok &= Check(o.learning_rate() > 0, "optim.learning_rate must be > 0", error);
  ok &= Check(o.beta1() >= 0 && o.beta1() < 1 && o.beta2() >= 0 && o.beta2() < 1,
              "optim.beta1/beta2 must be in [0, 1)", error);
  ok &= Check(o.label_smoothing() >= 0 && o.label_smoothing() < 1,
              "optim.label_smoothing must be in [0, 1)", error);
  ok &= Check(o.schedule() == "constant" || o.schedule() == "inv_sqrt" ||
                  o.schedule() == "flexible" || o.schedule() == "cyclic",
              "optim.schedule must be constant, inv_sqrt, flexible or cyclic", error);
  ok &= Check(c.training().device() == "cpu" || c.training().device() == "cuda",
              "training.device must be cpu or cuda", error);
  const TrainingConfig& t = c.training();
  ok &= Check(t.precision() == "float32" || t.precision() == "bf16" || t.precision() == "fp16",
              "training.precision must be float32, bf16 or fp16", error);
  ok &= Check(t.loss_scale() >= 1 && std::isfinite(t.loss_scale()),
              "training.loss_scale must be a finite number >= 1", error);
  ok &= Check(t.loss_scale_window() >= 1 && t.loss_scale_window() <= (1 << 24),
              "training.loss_scale_window must be between 1 and 16777216", error);
  // distributed.* (and optim.clip_norm) are checked where they are read: ps/plan.h.
  return ok;
}

std::string ToText(const TrainConfig& config) {
  std::string out;
  pb::TextFormat::PrintToString(config, &out);
  return out;
}

uint64_t ConfigHash(const TrainConfig& config) {
  std::string bytes;
  config.SerializeToString(&bytes);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : bytes) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace tern::config
