// An in-process Communicator: N "ranks" are threads of one process that share mailboxes. It
// behaves like the MPI one (ordered per source and tag, thread-safe, same collectives) without
// a launcher, so comm/ and ps/ unit tests run fast and under ThreadSanitizer.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace tern::comm {

class InProcessWorld {
 public:
  explicit InProcessWorld(int size);
  ~InProcessWorld();
  InProcessWorld(const InProcessWorld&) = delete;
  InProcessWorld& operator=(const InProcessWorld&) = delete;

  int size() const;
  // Wakes every rank blocked in a receive with a tern::Error (a rank failed; do not hang).
  void Abort();
  // The communicator of rank r; owned by the world.
  Communicator* rank(int r) const;

  struct State;

 private:
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<Communicator>> ranks_;
};

// Runs body(comm) on `size` threads, one per rank of a fresh world, and joins them. An
// exception escaping any rank's body is rethrown here (the first one, by rank).
void RunInProcess(int size, const std::function<void(Communicator& comm)>& body);

}  // namespace tern::comm
