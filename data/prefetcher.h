// A background thread that keeps a bounded queue of ready batches, so the training step does not
// wait for reading, encoding and padding. Yields exactly the batches (and positions) the wrapped
// Batcher would give directly.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "data/batcher.h"

namespace tern::data {

class Prefetcher {
 public:
  // Starts the thread at once. Restore the batcher's position before handing it over.
  // REQUIRES: capacity >= 1.
  Prefetcher(std::unique_ptr<Batcher> batcher, int capacity);
  // Stops the thread (it may be blocked on a full queue) and joins it.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // The next batch, waiting if none is ready; false once the batcher is done (max_epochs).
  // A tern::Error raised while preparing batches (a bad line under the "error" policy, a read
  // error) is rethrown here.
  bool Next(Batch* batch);
  // The position after the last batch Next returned (what a checkpoint saves).
  BatcherState state() const;
  // How many Next calls found the queue empty and had to wait (ideally only the first).
  int64_t waits() const;

 private:
  struct Item {
    Batch batch;
    BatcherState after;  // the batcher's position after this batch
  };
  void Run();

  const size_t capacity_;
  // Owned by the worker thread while it runs; nobody else touches it.
  std::unique_ptr<Batcher> batcher_;

  mutable std::mutex mu_;
  std::condition_variable changed_;  // signalled on every push, pop and stop
  std::deque<Item> queue_;           // GUARDED_BY(mu_)
  bool stop_ = false;                // GUARDED_BY(mu_): set by the destructor
  bool done_ = false;                // GUARDED_BY(mu_): the worker will push no more
  std::exception_ptr error_;         // GUARDED_BY(mu_): what ended the worker, if anything
  BatcherState consumed_;            // GUARDED_BY(mu_): position after the last batch popped
  int64_t waits_ = 0;                // GUARDED_BY(mu_)

  std::thread worker_;  // last: starts after every member above is initialized
};

}  // namespace tern::data
