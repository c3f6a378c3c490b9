#include "trainer/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"
#include "configs/config_io.h"

namespace tern::trainer {
namespace {

// 2: the manifest's own CRC (its last line) and the config's.
constexpr int kFormatVersion = 2;
constexpr char kManifestCrc[] = "manifest_crc: ";
constexpr int64_t kMaxRanks = 1 << 20;

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The manifest's fields, read strictly: every line "key: value", each key once, and with format
// 2 the manifest's CRC as its last line. A damaged manifest is one line naming the checkpoint.
class Manifest {
 public:
  Manifest(const std::string& text, const std::string& path) : path_(path) {
    std::istringstream in(text);
    std::string line;
    size_t offset = 0;
    while (std::getline(in, line)) {
      const size_t colon = line.find(": ");
      if (colon == std::string::npos) Damaged("malformed line '" + line + "'");
      if (!kv_.emplace(line.substr(0, colon), line.substr(colon + 2)).second)
        Damaged("field '" + line.substr(0, colon) + "' appears twice");
      if (line.rfind(kManifestCrc, 0) == 0) crc_offset_ = offset;
      offset += line.size() + 1;
    }
    const int64_t version = Int("format_version", 1, 1 << 30);
    if (version > kFormatVersion) {
      Fail(path_, ": checkpoint format version ", version, " is newer than this Tern reads (",
           kFormatVersion, "); use a newer tern-train");
    }
    if (version >= 2) {
      // The manifest's last line holds the CRC of every byte before it.
      if (crc_offset_ == std::string::npos || offset != text.size() ||
          text.find('\n', crc_offset_) + 1 != text.size()) {
        Damaged("its last line must be its checksum");
      }
      if (Get("manifest_crc") !=
          std::to_string(Crc32(std::string_view(text).substr(0, crc_offset_))))
        Damaged("checksum mismatch (was it edited?)");
    }
    version_ = version;
  }

  int64_t version() const { return version_; }
  bool Has(const std::string& key) const { return kv_.count(key) > 0; }

  const std::string& Get(const std::string& key) const {
    auto it = kv_.find(key);
    if (it == kv_.end()) Damaged("missing field '" + key + "'");
    return it->second;
  }
  // A decimal integer in [lo, hi].
  int64_t Int(const std::string& key, int64_t lo, int64_t hi) const {
    const std::string& text = Get(key);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
      Damaged("field '" + key + "' is '" + text + "', not a whole number from " +
              std::to_string(lo) + " to " + std::to_string(hi));
    }
    return v;
  }
  uint64_t Unsigned(const std::string& key) const {
    const std::string& text = Get(key);
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size())
      Damaged("field '" + key + "' is '" + text + "', not a whole number");
    return v;
  }
  // A finite number >= 0.
  double Real(const std::string& key) const {
    const std::string& text = Get(key);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0)
      Damaged("field '" + key + "' is '" + text + "', not a finite number >= 0");
    return v;
  }
  std::string Bytes(const std::string& key) const {
    const std::string& hex = Get(key);
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
      if (hi < 0 || lo < 0) break;
      out += static_cast<char>(hi * 16 + lo);
    }
    if (out.size() * 2 != hex.size()) Damaged("field '" + key + "' is not hexadecimal");
    return out;
  }

  [[noreturn]] void Damaged(const std::string& what) const {
    Fail(path_, ": damaged checkpoint manifest: ", what,
         "; remove this checkpoint directory and point checkpoint.latest at an older one");
  }

 private:
  std::string path_;
  std::map<std::string, std::string> kv_;
  size_t crc_offset_ = std::string::npos;
  int64_t version_ = 0;
};

// A float's value, exactly (9 significant digits round-trip a float).
std::string FloatText(double v) {
  std::ostringstream o;
  o << std::setprecision(9) << v;
  return o.str();
}

std::string ReadChecked(const std::string& path, const std::string& crc_text) {
  std::string bytes = ReadFile(path);
  if (std::to_string(Crc32(bytes)) != crc_text)
    Fail(path, ": checksum mismatch (the file is damaged; remove this checkpoint directory and ",
         "point checkpoint.latest at an older one)");
  return bytes;
}

// Model fields that do not shape the parameters or what they compute at inference: a resumed run
// may change them (embedding_init and attention_init only chose the starting values: checkpoints
// from before they existed resume under their defaults).
bool ChangesTrainingOnly(const std::string& field) {
  for (const char* f :
       {"model.dropout", "model.attention_dropout", "model.ffn_dropout", "model.rnn_dropout",
        "model.max_length", "model.embedding_init", "model.attention_init"}) {
    if (field == f) return true;
  }
  return false;
}

// Why a resumed run must keep the field a change changes ("" when it may change it).
std::string WhyKept(const config::FieldChange& change) {
  const std::string& field = change.field;
  if (field.rfind("model.", 0) == 0 && !ChangesTrainingOnly(field))
    return "it shapes the model the checkpoint holds";
  if (field == "optim.optimizer") return "the checkpoint holds its optimizer's state";
  if (field == "distributed.strategy") return "the checkpoint's shards hold its strategy's state";
  // Local SGD on or off, and its outer momentum delayed or not, change what the checkpoint's
  // shards and workers hold; H and the outer rates may change.
  auto above = [](const std::string& value, int n) { return std::atoi(value.c_str()) > n; };
  if (field == "distributed.local_steps" && above(change.before, 0) != above(change.after, 0))
    return "the checkpoint's shards and workers hold its local SGD state, or none";
  if (field == "distributed.outer_momentum_delay" &&
      above(change.before, 1) != above(change.after, 1))
    return "the checkpoint's shards hold its outer optimizer's state";
  return "";
}

}  // namespace

bool TrainingState::Improves(double cross_entropy) const {
  return std::isfinite(cross_entropy) && (best_valid == 0 || cross_entropy < best_valid);
}

void SaveCheckpoint(const std::string& model_dir, const Checkpoint& c, int keep) {
  namespace fs = std::filesystem;
  MakeDirs(model_dir);
  const std::string name = "checkpoint-" + std::to_string(c.state.update);
  const std::string tmp = model_dir + "/" + name + ".tmp." + std::to_string(::getpid());
  RemoveAll(tmp);
  MakeDirs(tmp);
  std::string params(static_cast<const char*>(c.params.raw()), c.params.bytes());
  WriteFileAtomic(tmp + "/params.bin", params);
  std::string smoothed;
  if (c.smoothed.defined()) {
    CHECK_EQ(c.smoothed.numel(), c.params.numel());
    smoothed.assign(static_cast<const char*>(c.smoothed.raw()), c.smoothed.bytes());
    WriteFileAtomic(tmp + "/smoothed.bin", smoothed);
  }
  const size_t ranks = c.shard_states.size();
  CHECK(ranks >= 1 && c.worker_states.size() == ranks && c.data_states.size() == ranks);
  std::ostringstream per_rank;
  for (size_t r = 0; r < ranks; ++r) {
    const std::string shard = "shard-" + std::to_string(r) + ".bin";
    const std::string worker = "worker-" + std::to_string(r) + ".bin";
    WriteFileAtomic(tmp + "/" + shard, c.shard_states[r]);
    WriteFileAtomic(tmp + "/" + worker, c.worker_states[r]);
    per_rank << "shard_crc_" << r << ": " << Crc32(c.shard_states[r]) << "\nworker_crc_" << r
             << ": " << Crc32(c.worker_states[r]) << "\ndata_state_" << r << ": "
             << Hex(c.data_states[r]) << "\n";
  }
  WriteFileAtomic(tmp + "/config.pbtxt", c.config_text);
  WriteFileAtomic(tmp + "/vocab.spm", c.vocab_bytes);
  std::ostringstream m;
  const TrainingState& s = c.state;
  m << "format_version: " << kFormatVersion << "\n"
    << "update: " << s.update << "\nepoch: " << s.epoch << "\nsentences: " << s.sentences
    << "\ntarget_words: " << s.target_words << "\nbest_valid: " << s.best_valid
    << "\nstalls: " << s.stalls << "\ncycle_start: " << s.cycle_start
    << "\nelapsed_seconds: " << s.elapsed_seconds << "\nloss_scale: " << FloatText(s.loss_scale)
    << "\nloss_scale_good_steps: " << s.loss_scale_good_steps << "\nranks: " << ranks
    << "\nparam_count: " << c.params.numel() << "\nconfig_hash: " << c.config_hash
    << "\nparams_crc: " << Crc32(params) << "\nvocab_crc: " << Crc32(c.vocab_bytes)
    << "\nconfig_crc: " << Crc32(c.config_text) << "\n";
  if (c.smoothed.defined()) m << "smoothed_crc: " << Crc32(smoothed) << "\n";
  m << per_rank.str();
  const uint32_t manifest_crc = Crc32(m.str());  // of every line before its own
  m << kManifestCrc << manifest_crc << "\n";
  WriteFileAtomic(tmp + "/manifest.txt", m.str());
  ReplaceDirAtomic(tmp, model_dir + "/" + name);
  WriteFileAtomic(model_dir + "/checkpoint.latest", name + "\n");

  // Keep the newest `keep` checkpoints.
  std::vector<std::pair<int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    std::string n = entry.path().filename().string();
    if (n.rfind("checkpoint-", 0) != 0 || n.find(".tmp.") != std::string::npos) continue;
    try {
      found.emplace_back(std::stoll(n.substr(11)), entry.path().string());
    } catch (...) {
    }
  }
  std::sort(found.rbegin(), found.rend());
  for (size_t i = std::max(keep, 1); i < found.size(); ++i) RemoveAll(found[i].second);
  RemoveUnfinishedCheckpoints(model_dir);
}

void RemoveUnfinishedCheckpoints(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir, ec)) {
    const std::string n = entry.path().filename().string();
    if (n.rfind("checkpoint-", 0) == 0 && n.find(".tmp.") != std::string::npos)
      RemoveAll(entry.path().string());
  }
}

namespace {

// The checkpoint directory checkpoint.latest names, or "" when there is none.
std::string LatestCheckpointDir(const std::string& model_dir) {
  const std::string latest = model_dir + "/checkpoint.latest";
  if (!FileExists(latest)) return "";
  std::string name = ReadFile(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.rfind("checkpoint-", 0) != 0 || name.size() == 11 ||
      name.find_first_not_of("0123456789", 11) != std::string::npos) {
    Fail(latest, ": names '", name, "', not a checkpoint-<update> directory; write the name of ",
         "the checkpoint to resume from into it, or remove it to start afresh");
  }
  return model_dir + "/" + name;
}

}  // namespace

std::string LatestCheckpointPrecision(const std::string& model_dir) {
  const std::string dir = LatestCheckpointDir(model_dir);
  if (dir.empty() || !FileExists(dir + "/config.pbtxt")) return "";
  config::TrainConfig saved;
  std::string error;
  if (!config::ParseTrainConfig(ReadFile(dir + "/config.pbtxt"), dir + "/config.pbtxt", &saved,
                                &error))
    return "";
  return saved.training().precision();
}

std::optional<Checkpoint> LoadLatestCheckpoint(const std::string& model_dir) {
  const std::string dir = LatestCheckpointDir(model_dir);
  if (dir.empty()) return std::nullopt;
  const std::string latest = model_dir + "/checkpoint.latest";
  const std::string name = dir.substr(model_dir.size() + 1);
  const std::string manifest_path = dir + "/manifest.txt";
  if (!FileExists(manifest_path)) {
    Fail(latest, " names ", name, ", which has no manifest.txt; point checkpoint.latest at ",
         "another checkpoint, or remove it to start afresh");
  }
  const Manifest kv(ReadFile(manifest_path), manifest_path);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Checkpoint c;
  TrainingState& s = c.state;
  s.update = kv.Int("update", 0, kMax);
  s.epoch = kv.Int("epoch", 0, kMax);
  s.sentences = kv.Int("sentences", 0, kMax);
  s.target_words = kv.Int("target_words", 0, kMax);
  s.best_valid = kv.Real("best_valid");
  s.stalls = kv.Int("stalls", 0, kMax);
  s.cycle_start = kv.Int("cycle_start", 0, kMax);
  s.elapsed_seconds = kv.Real("elapsed_seconds");
  if (kv.Has("loss_scale")) {  // absent from checkpoints written before fp16 training
    s.loss_scale = kv.Real("loss_scale");
    if (s.loss_scale != 0 && s.loss_scale < 1) kv.Damaged("loss_scale below 1");
    s.loss_scale_good_steps = kv.Int("loss_scale_good_steps", 0, kMax);
  }
  c.config_hash = kv.Unsigned("config_hash");
  const int64_t count = kv.Int("param_count", 0, kMax / 4);
  std::string params = ReadChecked(dir + "/params.bin", kv.Get("params_crc"));
  if (static_cast<int64_t>(params.size()) != count * 4)
    Fail(dir, "/params.bin: holds ", params.size(), " bytes, manifest says ", count, " parameters");
  c.params = Tensor::Empty({count});
  std::copy(params.begin(), params.end(), static_cast<char*>(c.params.raw()));
  if (kv.Has("smoothed_crc")) {  // absent without optim.exponential_smoothing
    const std::string smoothed = ReadChecked(dir + "/smoothed.bin", kv.Get("smoothed_crc"));
    if (smoothed.size() != params.size())
      Fail(dir, "/smoothed.bin: holds ", smoothed.size(), " bytes, manifest says ", count,
           " parameters");
    c.smoothed = Tensor::Empty({count});
    std::copy(smoothed.begin(), smoothed.end(), static_cast<char*>(c.smoothed.raw()));
  }
  const int64_t ranks = kv.Int("ranks", 1, kMaxRanks);
  for (int64_t r = 0; r < ranks; ++r) {
    const std::string n = std::to_string(r);
    c.shard_states.push_back(ReadChecked(dir + "/shard-" + n + ".bin", kv.Get("shard_crc_" + n)));
    c.worker_states.push_back(
        ReadChecked(dir + "/worker-" + n + ".bin", kv.Get("worker_crc_" + n)));
    c.data_states.push_back(kv.Bytes("data_state_" + n));
  }
  c.vocab_bytes = ReadChecked(dir + "/vocab.spm", kv.Get("vocab_crc"));
  c.config_text = kv.version() >= 2 ? ReadChecked(dir + "/config.pbtxt", kv.Get("config_crc"))
                                    : ReadFile(dir + "/config.pbtxt");
  std::string error;
  if (!config::ParseTrainConfig(c.config_text, dir + "/config.pbtxt", &c.config, &error))
    Fail(error, " (damaged checkpoint?)");
  if (config::ConfigHash(c.config) != c.config_hash) {
    Fail(dir, "/config.pbtxt: its hash differs from the manifest's config_hash (was it edited?); ",
         "remove this checkpoint directory and point checkpoint.latest at an older one");
  }
  return c;
}

std::vector<config::FieldChange> CheckResumeConfig(const config::TrainConfig& saved,
                                                   const config::TrainConfig& now,
                                                   const std::string& where) {
  // A checkpoint written before model.positions and model.layer_norm_eps existed computed what
  // their defaults compute: unset there, they are no change.
  config::TrainConfig before = saved;
  config::ModelConfig* m = before.mutable_model();
  if (m->positions().empty()) m->set_positions("marian");
  if (!m->has_layer_norm_eps()) m->set_layer_norm_eps(config::kDefaultLayerNormEps);
  std::vector<config::FieldChange> changes = config::ChangedFields(before, now);
  for (const config::FieldChange& c : changes) {
    const std::string why = WhyKept(c);
    if (why.empty()) continue;
    Fail(where, ": ", c.field, " is ", c.after, " but the checkpoint's is ", c.before, ", and ",
         why, "; keep ", c.field, ": ", c.before, " to resume, or train into a new --model-dir");
  }
  return changes;
}

}  // namespace tern::trainer
