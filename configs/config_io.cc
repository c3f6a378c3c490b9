#include "configs/config_io.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "configs/model_size.h"

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
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    *error =
        "config " + path + " is a directory; give a config file (e.g. configs/bible-small.pbtxt)";
    return false;
  }
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
  if (!m->has_emb_dim()) m->set_emb_dim(512);
  // In 64 bits: an absurd emb_dim is Validate's to refuse, not an overflow's to hide.
  if (!m->has_ffn_dim())
    m->set_ffn_dim(static_cast<int32_t>(std::min<int64_t>(4 * int64_t{m->emb_dim()}, INT32_MAX)));
  if (!m->has_heads()) m->set_heads(8);
  if (!m->has_enc_depth()) m->set_enc_depth(rnn ? 1 : 6);
  if (!m->has_dec_depth()) m->set_dec_depth(rnn ? 1 : 6);
  if (!m->has_rnn_dim()) m->set_rnn_dim(1024);
  if (!m->has_enc_cell_depth()) m->set_enc_cell_depth(1);
  if (!m->has_dec_cell_base_depth()) m->set_dec_cell_base_depth(2);
  if (!m->has_dec_cell_high_depth()) m->set_dec_cell_high_depth(1);
  if (!m->has_fc_depth()) m->set_fc_depth(4);
  if (m->ffn_activation().empty()) m->set_ffn_activation("relu");
  if (m->embedding_init().empty()) m->set_embedding_init("normal");
  if (m->attention_init().empty()) m->set_attention_init("scaled");
  if (m->positions().empty()) m->set_positions("marian");
  if (!m->has_layer_norm_eps()) m->set_layer_norm_eps(kDefaultLayerNormEps);
  if (!m->has_max_length()) m->set_max_length(256);

  DataConfig* d = c->mutable_data();
  if (!d->has_vocab_size()) d->set_vocab_size(8000);
  if (!d->has_max_length()) d->set_max_length(128);
  if (d->on_bad_line().empty()) d->set_on_bad_line("skip");
  if (!d->has_batch_tokens()) d->set_batch_tokens(2048);
  if (!d->has_maxi_batch()) d->set_maxi_batch(100);
  if (!d->has_prefetch()) d->set_prefetch(4);

  OptimConfig* o = c->mutable_optim();
  if (o->optimizer().empty()) o->set_optimizer("adam");
  if (!o->has_learning_rate()) o->set_learning_rate(3e-4f);
  if (!o->has_beta1()) o->set_beta1(0.9f);
  if (!o->has_beta2()) o->set_beta2(0.98f);
  if (!o->has_epsilon()) o->set_epsilon(1e-9f);
  if (o->schedule().empty()) o->set_schedule("inv_sqrt");
  if (!o->has_reference_words()) o->set_reference_words(2048);

  TrainingConfig* t = c->mutable_training();
  if (!t->has_seed()) t->set_seed(1234);
  if (!t->has_disp_freq()) t->set_disp_freq(50);
  if (!t->has_valid_freq()) t->set_valid_freq(500);
  if (!t->has_save_freq()) t->set_save_freq(500);
  if (!t->has_valid_beam()) t->set_valid_beam(4);
  if (t->device().empty()) t->set_device("cpu");
  if (!t->has_keep_checkpoints()) t->set_keep_checkpoints(1);
  if (t->precision().empty()) t->set_precision("auto");
  if (!t->has_loss_scale()) t->set_loss_scale(65536.f);
  if (!t->has_loss_scale_window()) t->set_loss_scale_window(2000);
  if (!t->has_max_nonfinite_updates()) t->set_max_nonfinite_updates(10);

  DistributedConfig* x = c->mutable_distributed();
  if (x->strategy().empty()) x->set_strategy("sync");
  if (!x->has_tau()) x->set_tau(1);
  if (!x->has_stall_seconds()) x->set_stall_seconds(45);
  if (x->overlap().empty()) x->set_overlap("auto");
}

namespace {

// The checks of one config: the first failing one's message is kept.
class Checker {
 public:
  explicit Checker(std::string* error) : error_(error) { error_->clear(); }
  bool ok() const { return error_->empty(); }

  void That(bool ok, const std::string& message) {
    if (!ok && error_->empty()) *error_ = message;
  }
  // lo <= value <= hi.
  void Range(const char* field, int64_t value, int64_t lo, int64_t hi) {
    That(value >= lo && value <= hi, std::string(field) + " must be between " + std::to_string(lo) +
                                         " and " + std::to_string(hi) + ", not " +
                                         std::to_string(value));
  }
  // A finite number, lo <= value (< hi when open, else <= hi).
  void Number(const char* field, double value, double lo, double hi, bool open = false) {
    const bool ok = std::isfinite(value) && value >= lo && (open ? value < hi : value <= hi);
    That(ok, std::string(field) + " must be a finite number in [" + Short(lo) + ", " + Short(hi) +
                 (open ? ")" : "]") + ", not " + Short(value));
  }
  // A finite number > 0.
  void Positive(const char* field, double value) {
    That(std::isfinite(value) && value > 0,
         std::string(field) + " must be a finite number > 0, not " + Short(value));
  }
  void OneOf(const char* field, const std::string& value,
             std::initializer_list<const char*> known) {
    std::string list;
    for (const char* k : known) {
      if (value == k) return;
      list += std::string(list.empty() ? "" : ", ") + k;
    }
    That(false, std::string(field) + ": unknown value '" + value + "' (known: " + list + ")");
  }

 private:
  static std::string Short(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  }
  std::string* error_;
};

constexpr int64_t kMaxWidth = 1 << 16;  // emb_dim, rnn_dim
constexpr int64_t kMaxFfnDim = 1 << 20;
constexpr int64_t kMaxDepth = 1000;      // layers, cells
constexpr int64_t kMaxLength = 1 << 16;  // model.max_length, data.max_length
constexpr int64_t kMaxVocab = 1 << 20;
constexpr int64_t kMaxCount = int64_t{1} << 30;  // frequencies, budgets of tokens and windows

bool IsTransformer(const ModelConfig& m) { return m.arch() == "transformer" || m.arch() == "aan"; }

void CheckModel(const ModelConfig& m, Checker& check) {
  check.OneOf("model.arch", m.arch(), {"transformer", "aan", "s2s", "devlin"});
  if (IsTransformer(m)) {
    // The sinusoidal positions fill a sine half and a cosine half of each embedding.
    check.Range("model.emb_dim", m.emb_dim(), 4, kMaxWidth);
    check.That(m.emb_dim() % 2 == 0,
               "model.emb_dim must be even (the positions take a sine and "
               "a cosine half), not " +
                   std::to_string(m.emb_dim()));
    check.Range("model.heads", m.heads(), 1, std::max(1, m.emb_dim()));
    check.That(m.heads() <= 0 || m.emb_dim() % m.heads() == 0,
               "model.emb_dim (" + std::to_string(m.emb_dim()) +
                   ") must be a multiple of model.heads (" + std::to_string(m.heads()) +
                   "): each head takes emb_dim / heads of the width");
  } else {
    check.Range("model.emb_dim", m.emb_dim(), 1, kMaxWidth);
  }
  // The Transformer's positions; for every architecture the runtime's default input limit.
  check.Range("model.max_length", m.max_length(), 2, kMaxLength);
  check.Range("model.ffn_dim", m.ffn_dim(), 1, kMaxFfnDim);
  check.Range("model.enc_depth", m.enc_depth(), 1, kMaxDepth);
  check.Range("model.dec_depth", m.dec_depth(), 1, kMaxDepth);
  check.Range("model.rnn_dim", m.rnn_dim(), 1, kMaxWidth);
  check.Range("model.enc_cell_depth", m.enc_cell_depth(), 1, kMaxDepth);
  check.That(m.dec_cell_base_depth() >= 2,
             "model.dec_cell_base_depth must be >= 2 (the cGRU has two cells)");
  check.Range("model.dec_cell_base_depth", m.dec_cell_base_depth(), 2, kMaxDepth);
  check.Range("model.dec_cell_high_depth", m.dec_cell_high_depth(), 1, kMaxDepth);
  check.Range("model.fc_depth", m.fc_depth(), 1, kMaxDepth);
  check.Number("model.clip_weights", m.clip_weights(), 0, 1e30);
  check.Number("model.clip_relu", m.clip_relu(), 0, 1e30);
  check.Number("model.dropout", m.dropout(), 0, 1, /*open=*/true);
  check.Number("model.attention_dropout", m.attention_dropout(), 0, 1, true);
  check.Number("model.ffn_dropout", m.ffn_dropout(), 0, 1, true);
  check.Number("model.rnn_dropout", m.rnn_dropout(), 0, 1, true);
  check.OneOf("model.ffn_activation", m.ffn_activation(), {"relu", "gelu", "swish"});
  check.That(m.ffn_activation() != "swish" || IsTransformer(m),
             "model.ffn_activation swish is the Transformer's (transformer, aan); " + m.arch() +
                 " takes relu or gelu");
  check.OneOf("model.embedding_init", m.embedding_init(), {"normal", "glorot"});
  check.OneOf("model.attention_init", m.attention_init(), {"glorot", "scaled"});
  check.OneOf("model.positions", m.positions(), {"marian", "vaswani"});
  check.Number("model.layer_norm_eps", m.layer_norm_eps(), 1e-12, 0.1);
  check.That(
      IsTransformer(m) || (m.positions() == "marian" && m.layer_norm_eps() == kDefaultLayerNormEps),
      "model.positions and model.layer_norm_eps are the Transformer's (transformer, aan); "
      "leave them unset for " +
          m.arch());
}

void CheckData(const TrainConfig& c, Checker& check) {
  const DataConfig& d = c.data();
  check.OneOf("data.on_bad_line", d.on_bad_line(), {"skip", "error"});
  check.Range("data.vocab_size", d.vocab_size(), 16, kMaxVocab);
  check.Range("data.max_length", d.max_length(), 1, kMaxLength);
  // A sentence of max_length pieces takes one position more: eos on the source, bos on the
  // target side.
  if (IsTransformer(c.model())) {
    check.That(d.max_length() < c.model().max_length(),
               "data.max_length (" + std::to_string(d.max_length()) +
                   ") must be below model.max_length (" + std::to_string(c.model().max_length()) +
                   "): a sentence takes one position more for eos or bos");
  }
  check.Range("data.batch_tokens", d.batch_tokens(), 2, kMaxCount);
  check.Range("data.maxi_batch", d.maxi_batch(), 1, kMaxCount);
  check.That(static_cast<int64_t>(d.maxi_batch()) * d.batch_tokens() <= kMaxCount,
             "data.maxi_batch x data.batch_tokens (" +
                 std::to_string(static_cast<int64_t>(d.maxi_batch()) * d.batch_tokens()) +
                 " tokens read and sorted at once) must be at most " + std::to_string(kMaxCount));
  check.Range("data.shuffle_window", d.shuffle_window(), 0, kMaxCount);
  check.Range("data.prefetch", d.prefetch(), 1, 1024);
}

void CheckOptim(const OptimConfig& o, Checker& check) {
  check.OneOf("optim.optimizer", o.optimizer(), {"adam", "sgd"});
  check.Positive("optim.learning_rate", o.learning_rate());
  check.Number("optim.beta1", o.beta1(), 0, 1, /*open=*/true);
  check.Number("optim.beta2", o.beta2(), 0, 1, true);
  check.Positive("optim.epsilon", o.epsilon());
  check.Number("optim.label_smoothing", o.label_smoothing(), 0, 1, true);
  check.Number("optim.exponential_smoothing", o.exponential_smoothing(), 0, 1, true);
  check.OneOf("optim.schedule", o.schedule(), {"constant", "inv_sqrt", "flexible", "cyclic"});
  check.Range("optim.warmup_updates", o.warmup_updates(), 0, kMaxCount);
  check.Number("optim.weight_decay", o.weight_decay(), 0, 1e30);
  check.Range("optim.cooldown_after", o.cooldown_after(), 0, kMaxCount);
  check.Number("optim.cooldown_beta1", o.cooldown_beta1(), 0, 1, true);
  check.Number("optim.cooldown_beta2", o.cooldown_beta2(), 0, 1, true);
  check.Range("optim.reference_words", o.reference_words(), 1, kMaxCount);
  check.Number("optim.lr_min", o.lr_min(), 0, o.learning_rate());
  check.Range("optim.cycle_updates", o.cycle_updates(), o.schedule() == "cyclic" ? 1 : 0,
              kMaxCount);
}

void CheckTraining(const TrainingConfig& t, Checker& check) {
  check.Range("training.threads", t.threads(), 0, kMaxComputeThreads);
  check.Range("training.disp_freq", t.disp_freq(), 1, kMaxDispFreq);
  check.Range("training.valid_freq", t.valid_freq(), 1, kMaxCount);
  check.Range("training.save_freq", t.save_freq(), 1, kMaxCount);
  check.Range("training.early_stopping", t.early_stopping(), 0, kMaxCount);
  check.Range("training.valid_beam", t.valid_beam(), 1, 1024);
  check.Range("training.valid_max_sentences", t.valid_max_sentences(), 0, kMaxCount);
  check.Range("training.keep_checkpoints", t.keep_checkpoints(), 1, kMaxCount);
  check.Range("training.max_nonfinite_updates", t.max_nonfinite_updates(), 1, kMaxCount);
  check.OneOf("training.device", t.device(), {"cpu", "cuda"});
  check.OneOf("training.precision", t.precision(), {"auto", "float32", "bf16", "fp16"});
  check.That(t.loss_scale() >= 1 && std::isfinite(t.loss_scale()),
             "training.loss_scale must be a finite number >= 1");
  check.Range("training.loss_scale_window", t.loss_scale_window(), 1, 1 << 24);
}

}  // namespace

bool ValidateModel(const ModelConfig& model, std::string* error) {
  Checker check(error);
  CheckModel(model, check);
  return check.ok();
}

bool Validate(const TrainConfig& c, std::string* error) {
  Checker check(error);
  CheckModel(c.model(), check);
  CheckData(c, check);
  CheckOptim(c.optim(), check);
  CheckTraining(c.training(), check);
  // distributed.* (and optim.clip_norm) are checked where they are read: ps/plan.h.
  // The size last: it needs every size field in range.
  return check.ok() && CheckModelSize(c, c.data().vocab_size(), 0, error);
}

std::vector<FieldChange> ChangedFields(const TrainConfig& before, const TrainConfig& after) {
  std::vector<FieldChange> changes;
  const pb::Descriptor* top = TrainConfig::descriptor();
  for (int i = 0; i < top->field_count(); ++i) {
    const pb::FieldDescriptor* section = top->field(i);
    const pb::Message& a = before.GetReflection()->GetMessage(before, section);
    const pb::Message& b = after.GetReflection()->GetMessage(after, section);
    for (int j = 0; j < section->message_type()->field_count(); ++j) {
      const pb::FieldDescriptor* field = section->message_type()->field(j);
      std::string x, y;
      pb::TextFormat::PrintFieldValueToString(a, field, -1, &x);
      pb::TextFormat::PrintFieldValueToString(b, field, -1, &y);
      if (x != y) changes.push_back({section->name() + "." + field->name(), x, y});
    }
  }
  return changes;
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
