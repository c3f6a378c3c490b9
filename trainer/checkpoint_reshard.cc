// Resuming on another rank count (see checkpoint_reshard.h).
#include "trainer/checkpoint_reshard.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "data/batcher.h"
#include "ps/reshard.h"
#include "ps/strategy.h"

namespace tern::trainer {

void ReshardCheckpoint(const std::string& kind, int new_ranks, Checkpoint* c) {
  const int old_ranks = static_cast<int>(c->shard_states.size());
  if (old_ranks == new_ranks) return;
  const int64_t n = c->params.numel();
  c->shard_states = ps::ReshardShardStates(kind, c->shard_states, n, new_ranks);
  const bool inner = !c->worker_states.empty() && ps::IsInnerState(c->worker_states[0]);
  const bool residuals = !inner && std::any_of(c->worker_states.begin(), c->worker_states.end(),
                                               [](const std::string& s) { return !s.empty(); });
  c->worker_states = ps::ReshardWorkerStates(c->worker_states, n, new_ranks);

  size_t earliest = 0;
  std::pair<int64_t, int64_t> first{-1, -1};
  for (size_t r = 0; r < c->data_states.size(); ++r) {
    const data::BatcherState s = data::BatcherState::Parse(c->data_states[r]);
    if (r == 0 || std::make_pair(s.epoch, s.offset) < first) {
      first = {s.epoch, s.offset};
      earliest = r;
    }
  }
  c->data_states.assign(new_ranks, c->data_states[earliest]);
  // Sentence and word counts are kept per rank (the log multiplies by the rank count).
  c->state.sentences = c->state.sentences * old_ranks / new_ranks;
  c->state.target_words = c->state.target_words * old_ranks / new_ranks;

  LOG(INFO) << "[training] re-sharding a checkpoint of " << old_ranks << " rank(s) for "
            << new_ranks << ": shards and optimizer state re-cut; "
            << (residuals ? "gradient-dropping residuals summed and given to the new owners; " : "")
            << (inner ? "local SGD's inner optimizers taken from old worker w mod " +
                            std::to_string(old_ranks) + "; "
                      : std::string())
            << "every rank restarts the data at epoch " << first.first + 1 << ", batch "
            << first.second << " (old rank " << earliest << "'s position, the earliest)";
}

}  // namespace tern::trainer
