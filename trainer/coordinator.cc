#include "trainer/coordinator.h"

#include <glog/logging.h>

#include <cstring>
#include <string>

namespace tern::trainer {
namespace {

// A progress report as it travels (both ends are this program: no byte-order concerns).
struct Wire {
  int64_t update, sentences, words;
  double seconds;
  int64_t last, stop_signal;
};

}  // namespace

AsyncCoordinator::AsyncCoordinator(comm::Communicator* comm)
    : comm_(comm), latest_(comm->size()), rates_(comm->size(), 0.f), last_(comm->size(), false) {}

void AsyncCoordinator::Report(const Progress& p, bool last) {
  CHECK_NE(comm_->rank(), 0) << "rank 0 leads; it does not report";
  const Wire w{p.update, p.sentences, p.words, p.seconds, last ? 1 : 0, p.stop_signal};
  comm_->Send(0, kTagProgress, &w, sizeof(w));
}

std::vector<AsyncCoordinator::Order> AsyncCoordinator::Orders() {
  std::vector<Order> orders;
  std::string bytes;
  int source = 0;
  while (comm_->TryRecv(0, kTagOrder, &bytes, &source)) {
    int32_t o = 0;
    CHECK_EQ(bytes.size(), sizeof(o)) << "an order from rank 0 of the wrong size";
    std::memcpy(&o, bytes.data(), sizeof(o));
    CHECK(o >= static_cast<int32_t>(Order::kSave) &&
          o <= static_cast<int32_t>(Order::kStopOnSignal))
        << "unknown order " << o << " from rank 0";
    orders.push_back(static_cast<Order>(o));
  }
  return orders;
}

void AsyncCoordinator::Send(Order order) {
  CHECK_EQ(comm_->rank(), 0) << "only rank 0 gives orders";
  const int32_t o = static_cast<int32_t>(order);
  for (int r = 1; r < comm_->size(); ++r) comm_->Send(r, kTagOrder, &o, sizeof(o));
}

void AsyncCoordinator::Take(int source, const std::string& bytes) {
  CHECK(source > 0 && source < comm_->size()) << "a progress report from rank " << source;
  CHECK_EQ(bytes.size(), sizeof(Wire))
      << "a progress report of the wrong size from rank " << source;
  Wire w;
  std::memcpy(&w, bytes.data(), sizeof(w));
  latest_[source] =
      Progress{w.update, w.sentences, w.words, w.seconds, static_cast<int>(w.stop_signal)};
  if (w.stop_signal != 0 && stop_request_.rank == 0)
    stop_request_ = {source, static_cast<int>(w.stop_signal)};
  // A last report right after a regular one covers no words: the rate stays the previous one.
  if (w.words > 0 && w.seconds > 0) rates_[source] = static_cast<float>(w.words / w.seconds);
  if (w.last != 0) last_[source] = true;
}

void AsyncCoordinator::Collect() {
  std::string bytes;
  int source = 0;
  while (comm_->TryRecv(comm::kAnySource, kTagProgress, &bytes, &source)) Take(source, bytes);
}

void AsyncCoordinator::AwaitLastReports() {
  std::string bytes;
  for (int r = 1; r < comm_->size(); ++r)
    while (!last_[r]) Take(comm_->Recv(r, kTagProgress, &bytes), bytes);
}

std::vector<float> AsyncCoordinator::Rates(float own) const {
  std::vector<float> rates = rates_;
  rates[0] = own;
  return rates;
}

int64_t AsyncCoordinator::Sentences(int64_t own) const {
  int64_t total = own;
  for (size_t r = 1; r < latest_.size(); ++r) total += latest_[r].sentences;
  return total;
}

std::string AsyncCoordinator::FollowerUpdates() const {
  std::string out;
  for (size_t r = 1; r < latest_.size(); ++r)
    out += (r > 1 ? ", rank " : "rank ") + std::to_string(r) + ": " +
           std::to_string(latest_[r].update);
  return out;
}

}  // namespace tern::trainer
