#include "trainer/coordinator.h"

#include <glog/logging.h>

#include <cstring>
#include <string>

namespace tern::trainer {
namespace {

// A progress report as it travels (both ends are this program: no byte-order concerns),
// followed by its record (RecordWire).
struct Wire {
  int64_t update, sentences, words;
  double seconds;
  int64_t last, stop_signal;
};

struct RecordWire {
  int64_t rank, update, epoch, sentences, target_words;
  double elapsed_seconds, cost_per_word, cpu_seconds;
  float learning_rate, words_per_second, sent_fraction;
  int32_t has_sent_fraction, has_staleness;
  int64_t pushes, max;
  double mean;
  int32_t p50, p90, p99;
  int64_t bytes_pushed, bytes_pulled;
};

}  // namespace

std::string EncodeRankProgress(const RankProgress& r) {
  RecordWire w{};
  w.rank = r.rank;
  w.update = r.update;
  w.epoch = r.epoch;
  w.sentences = r.sentences;
  w.target_words = r.target_words;
  w.elapsed_seconds = r.elapsed_seconds;
  w.cost_per_word = r.cost_per_word;
  w.cpu_seconds = r.cpu_seconds;
  w.learning_rate = r.learning_rate;
  w.words_per_second = r.words_per_second;
  w.has_sent_fraction = r.sent_fraction.has_value();
  w.sent_fraction = r.sent_fraction.value_or(1.f);
  w.has_staleness = r.staleness.has_value();
  if (r.staleness) {
    w.pushes = r.staleness->pushes;
    w.max = r.staleness->max;
    w.mean = r.staleness->mean;
    w.p50 = r.staleness->p50;
    w.p90 = r.staleness->p90;
    w.p99 = r.staleness->p99;
  }
  w.bytes_pushed = r.bytes_pushed;
  w.bytes_pulled = r.bytes_pulled;
  return std::string(reinterpret_cast<const char*>(&w), sizeof(w));
}

RankProgress DecodeRankProgress(const std::string& bytes) {
  CHECK_EQ(bytes.size(), sizeof(RecordWire)) << "a metrics record of the wrong size";
  RecordWire w;
  std::memcpy(&w, bytes.data(), sizeof(w));
  RankProgress r;
  r.rank = static_cast<int>(w.rank);
  r.update = w.update;
  r.epoch = w.epoch;
  r.sentences = w.sentences;
  r.target_words = w.target_words;
  r.elapsed_seconds = w.elapsed_seconds;
  r.cost_per_word = w.cost_per_word;
  r.cpu_seconds = w.cpu_seconds;
  r.learning_rate = w.learning_rate;
  r.words_per_second = w.words_per_second;
  if (w.has_sent_fraction) r.sent_fraction = w.sent_fraction;
  if (w.has_staleness) r.staleness = StalenessSummary{w.pushes, w.mean, w.p50, w.p90, w.p99, w.max};
  r.bytes_pushed = w.bytes_pushed;
  r.bytes_pulled = w.bytes_pulled;
  return r;
}

AsyncCoordinator::AsyncCoordinator(comm::Communicator* comm)
    : comm_(comm), latest_(comm->size()), rates_(comm->size(), 0.f), last_(comm->size(), false) {}

void AsyncCoordinator::Report(const Progress& p, bool last) {
  CHECK_NE(comm_->rank(), 0) << "rank 0 leads; it does not report";
  const Wire w{p.update, p.sentences, p.words, p.seconds, last ? 1 : 0, p.stop_signal};
  std::string bytes(reinterpret_cast<const char*>(&w), sizeof(w));
  bytes += EncodeRankProgress(p.record);
  comm_->Send(0, kTagProgress, bytes.data(), bytes.size());
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
  CHECK_EQ(bytes.size(), sizeof(Wire) + sizeof(RecordWire))
      << "a progress report of the wrong size from rank " << source;
  Wire w;
  std::memcpy(&w, bytes.data(), sizeof(w));
  latest_[source] = Progress{w.update,
                             w.sentences,
                             w.words,
                             w.seconds,
                             static_cast<int>(w.stop_signal),
                             DecodeRankProgress(bytes.substr(sizeof(Wire)))};
  latest_[source].record.rank = source;
  new_reports_.push_back(latest_[source]);
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

std::vector<AsyncCoordinator::Progress> AsyncCoordinator::TakeNewReports() {
  std::vector<Progress> reports;
  reports.swap(new_reports_);
  return reports;
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
