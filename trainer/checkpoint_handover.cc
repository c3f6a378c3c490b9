#include "trainer/checkpoint_handover.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace tern::trainer {
namespace {

// Tags of the checkpoint traffic between ranks (below comm::kMaxUserTag, apart from ps/'s).
constexpr int kTagCheckpointToRoot = 9101;
constexpr int kTagCheckpointToRank = 9102;

}  // namespace

RankShare HandOutCheckpoint(comm::Communicator* comm, const Checkpoint* loaded,
                            TrainingState* state) {
  RankShare mine;
  if (comm->rank() == 0) {
    CHECK(loaded != nullptr) << "rank 0 hands out the checkpoint it loaded";
    const std::string s(reinterpret_cast<const char*>(&loaded->state), sizeof(TrainingState));
    for (int r = 1; r < comm->size(); ++r) {
      for (const std::string* part :
           {&loaded->shard_states[r], &loaded->worker_states[r], &loaded->data_states[r], &s})
        comm->Send(r, kTagCheckpointToRank, part->data(), part->size());
    }
    mine = {loaded->shard_states[0], loaded->worker_states[0], loaded->data_states[0]};
    *state = loaded->state;
    return mine;
  }
  std::string s;
  comm->Recv(0, kTagCheckpointToRank, &mine.shard);
  comm->Recv(0, kTagCheckpointToRank, &mine.worker);
  comm->Recv(0, kTagCheckpointToRank, &mine.data);
  comm->Recv(0, kTagCheckpointToRank, &s);
  CHECK_EQ(s.size(), sizeof(TrainingState));
  std::copy(s.begin(), s.end(), reinterpret_cast<char*>(state));
  return mine;
}

std::optional<Checkpoint> GatherCheckpoint(comm::Communicator* comm, RankShare mine) {
  if (comm->rank() != 0) {
    for (const std::string* part : {&mine.shard, &mine.worker, &mine.data})
      comm->Send(0, kTagCheckpointToRoot, part->data(), part->size());
    return std::nullopt;
  }
  Checkpoint c;
  c.shard_states = {std::move(mine.shard)};
  c.worker_states = {std::move(mine.worker)};
  c.data_states = {std::move(mine.data)};
  for (int r = 1; r < comm->size(); ++r) {
    std::string s, w, d;
    comm->Recv(r, kTagCheckpointToRoot, &s);
    comm->Recv(r, kTagCheckpointToRoot, &w);
    comm->Recv(r, kTagCheckpointToRoot, &d);
    c.shard_states.push_back(std::move(s));
    c.worker_states.push_back(std::move(w));
    c.data_states.push_back(std::move(d));
  }
  return c;
}

}  // namespace tern::trainer
