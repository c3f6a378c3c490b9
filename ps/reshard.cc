// Re-sharding checkpoints onto another rank count (see reshard.h).
#include "ps/reshard.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "optim/optimizer.h"
#include "ps/shard.h"
#include "ps/shard_map.h"
#include "ps/strategy.h"

namespace tern::ps {
namespace {

// Slices a joined (n) optimizer state by the new map.
std::vector<std::string> SliceByMap(const std::string& joined, const ShardMap& map) {
  std::vector<std::string> out;
  for (int s = 0; s < map.num_shards(); ++s)
    out.push_back(optim::SliceState(joined, map.range(s).begin, map.range(s).end));
  return out;
}

}  // namespace

std::vector<std::string> ReshardShardStates(const std::string& kind,
                                            const std::vector<std::string>& states,
                                            int64_t num_params, int new_ranks) {
  CHECK(!states.empty());
  const ShardMap old_map(num_params, static_cast<int>(states.size()));
  const ShardMap new_map(num_params, new_ranks);
  if (kind == "sync") return SliceByMap(optim::JoinStates(states), new_map);
  if (kind != "async") Fail("distributed.strategy: unknown strategy '", kind, "'");
  std::vector<float> params(num_params);
  std::vector<std::string> optimizers;
  for (size_t s = 0; s < states.size(); ++s) {
    Shard::StateParts parts = Shard::DecodeState(states[s]);
    const ShardRange& r = old_map.range(static_cast<int>(s));
    if (static_cast<int64_t>(parts.params.size()) != r.size())
      Fail("shard-", s, ".bin: holds ", parts.params.size(), " parameters, its shard has ",
           r.size(), " (a different model or a damaged checkpoint)");
    std::copy(parts.params.begin(), parts.params.end(), params.begin() + r.begin);
    optimizers.push_back(std::move(parts.optimizer));
  }
  const std::vector<std::string> sliced = SliceByMap(optim::JoinStates(optimizers), new_map);
  std::vector<std::string> out;
  for (int s = 0; s < new_ranks; ++s) {
    const ShardRange& r = new_map.range(s);
    out.push_back(Shard::EncodeState(params.data() + r.begin, r.size(), /*version=*/0, sliced[s]));
  }
  return out;
}

std::vector<std::string> ReshardWorkerStates(const std::vector<std::string>& states,
                                             int64_t num_params, int new_ranks) {
  CHECK_GE(new_ranks, 1);
  const bool none =
      std::all_of(states.begin(), states.end(), [](const std::string& s) { return s.empty(); });
  if (none) return std::vector<std::string>(new_ranks);
  if (IsInnerState(states[0])) {
    // Local SGD's inner optimizers are whole-model, one per worker: new worker w takes old
    // worker w mod the old count's.
    std::vector<std::string> out;
    for (int w = 0; w < new_ranks; ++w) out.push_back(states[w % states.size()]);
    return out;
  }
  // Layout (AsyncSgd::SaveWorkerState): uint64 sample counter, then the (n) residual.
  const size_t expected = sizeof(uint64_t) + num_params * sizeof(float);
  std::vector<double> sum(num_params, 0.0);  // double: the sum does not depend on the order
  uint64_t drops = 0;
  for (size_t w = 0; w < states.size(); ++w) {
    if (states[w].size() != expected)
      Fail("worker-", w, ".bin: ", states[w].size(), " bytes of gradient-dropping state, expected ",
           expected);
    uint64_t d = 0;
    std::memcpy(&d, states[w].data(), sizeof(d));
    drops = std::max(drops, d);
    const char* p = states[w].data() + sizeof(uint64_t);
    for (int64_t i = 0; i < num_params; ++i) {
      float x;
      std::memcpy(&x, p + i * sizeof(float), sizeof(x));
      sum[i] += x;
    }
  }
  const ShardMap new_map(num_params, new_ranks);
  std::vector<std::string> out;
  for (int w = 0; w < new_ranks; ++w) {
    std::string bytes(expected, '\0');
    std::memcpy(bytes.data(), &drops, sizeof(drops));
    float* residual = reinterpret_cast<float*>(bytes.data() + sizeof(uint64_t));
    const ShardRange& r = new_map.range(w);
    for (int64_t i = r.begin; i < r.end; ++i) residual[i] = static_cast<float>(sum[i]);
    out.push_back(std::move(bytes));
  }
  return out;
}

}  // namespace tern::ps
