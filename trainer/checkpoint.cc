#include "trainer/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <vector>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"

namespace tern::trainer {
namespace {

constexpr int kFormatVersion = 1;

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::string Unhex(const std::string& hex, const std::string& where) {
  if (hex.size() % 2) Fail(where, ": malformed hex value");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::map<std::string, std::string> ParseManifest(const std::string& text, const std::string& path) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos) Fail(path, ": malformed line '", line, "'");
    kv[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return kv;
}

// A float's value, exactly (9 significant digits round-trip a float).
std::string FloatText(double v) {
  std::ostringstream o;
  o << std::setprecision(9) << v;
  return o.str();
}

const std::string& Get(const std::map<std::string, std::string>& kv, const std::string& key,
                       const std::string& path) {
  auto it = kv.find(key);
  if (it == kv.end()) Fail(path, ": missing field '", key, "' (damaged checkpoint?)");
  return it->second;
}

std::string ReadChecked(const std::string& path, const std::string& crc_text) {
  std::string bytes = ReadFile(path);
  if (std::to_string(Crc32(bytes)) != crc_text)
    Fail(path, ": checksum mismatch (the file is damaged; remove this checkpoint directory and ",
         "point checkpoint.latest at an older one)");
  return bytes;
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
    << "\nparams_crc: " << Crc32(params) << "\nvocab_crc: " << Crc32(c.vocab_bytes) << "\n"
    << per_rank.str();
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
}

std::optional<Checkpoint> LoadLatestCheckpoint(const std::string& model_dir) {
  const std::string latest = model_dir + "/checkpoint.latest";
  if (!FileExists(latest)) return std::nullopt;
  std::string name = ReadFile(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  const std::string dir = model_dir + "/" + name;
  const std::string manifest_path = dir + "/manifest.txt";
  auto kv = ParseManifest(ReadFile(manifest_path), manifest_path);
  if (std::stoi(Get(kv, "format_version", manifest_path)) > kFormatVersion)
    Fail(manifest_path, ": checkpoint format version ", Get(kv, "format_version", manifest_path),
         " is newer than this Tern reads (", kFormatVersion, "); use a newer tern-train");
  Checkpoint c;
  TrainingState& s = c.state;
  s.update = std::stoll(Get(kv, "update", manifest_path));
  s.epoch = std::stoll(Get(kv, "epoch", manifest_path));
  s.sentences = std::stoll(Get(kv, "sentences", manifest_path));
  s.target_words = std::stoll(Get(kv, "target_words", manifest_path));
  s.best_valid = std::stod(Get(kv, "best_valid", manifest_path));
  s.stalls = std::stoll(Get(kv, "stalls", manifest_path));
  s.cycle_start = std::stoll(Get(kv, "cycle_start", manifest_path));
  s.elapsed_seconds = std::stod(Get(kv, "elapsed_seconds", manifest_path));
  if (kv.count("loss_scale")) {  // absent from checkpoints written before fp16 training
    s.loss_scale = std::stod(Get(kv, "loss_scale", manifest_path));
    s.loss_scale_good_steps = std::stoll(Get(kv, "loss_scale_good_steps", manifest_path));
  }
  c.config_hash = std::stoull(Get(kv, "config_hash", manifest_path));
  const int64_t count = std::stoll(Get(kv, "param_count", manifest_path));
  std::string params = ReadChecked(dir + "/params.bin", Get(kv, "params_crc", manifest_path));
  if (static_cast<int64_t>(params.size()) != count * 4)
    Fail(dir, "/params.bin: holds ", params.size(), " bytes, manifest says ", count, " parameters");
  c.params = Tensor::Empty({count});
  std::copy(params.begin(), params.end(), static_cast<char*>(c.params.raw()));
  const int ranks = std::stoi(Get(kv, "ranks", manifest_path));
  for (int r = 0; r < ranks; ++r) {
    const std::string n = std::to_string(r);
    c.shard_states.push_back(
        ReadChecked(dir + "/shard-" + n + ".bin", Get(kv, "shard_crc_" + n, manifest_path)));
    c.worker_states.push_back(
        ReadChecked(dir + "/worker-" + n + ".bin", Get(kv, "worker_crc_" + n, manifest_path)));
    c.data_states.push_back(Unhex(Get(kv, "data_state_" + n, manifest_path), manifest_path));
  }
  c.vocab_bytes = ReadChecked(dir + "/vocab.spm", Get(kv, "vocab_crc", manifest_path));
  c.config_text = ReadFile(dir + "/config.pbtxt");
  return c;
}

}  // namespace tern::trainer
