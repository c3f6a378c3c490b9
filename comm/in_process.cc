// In-process communicator: per-rank mailboxes guarded by a mutex; collectives are built from
// point-to-point messages on reserved tags, summing in rank order so every rank gets bitwise
// the same result.
#include "comm/in_process.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "common/error.h"

namespace tern::comm {
namespace {

constexpr int kCollectiveTag = kMaxUserTag + 1;

struct Envelope {
  int source;
  int tag;
  std::string bytes;
};

struct Mailbox {
  std::mutex mu;
  std::condition_variable arrived;
  std::deque<Envelope> queue;  // GUARDED_BY(mu)
};

}  // namespace

struct InProcessWorld::State {
  explicit State(int n) : mailboxes(n) {}
  std::vector<Mailbox> mailboxes;
  // Set when a rank's body failed: blocked receivers throw instead of waiting forever.
  std::atomic<bool> aborted{false};

  void Abort() {
    aborted = true;
    for (Mailbox& box : mailboxes) {
      std::lock_guard<std::mutex> lock(box.mu);
      box.arrived.notify_all();
    }
  }
};

namespace {

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(InProcessWorld::State* world, int rank) : world_(world), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(world_->mailboxes.size()); }
  const char* name() const override { return "in-process"; }

  void Send(int peer, int tag, const void* data, size_t bytes) override {
    CheckPeerAndTag(peer, tag, false);
    SendRaw(peer, tag, data, bytes);
  }

  int Recv(int peer, int tag, std::string* bytes) override {
    CheckPeerAndTag(peer, tag, true);
    return RecvRaw(peer, tag, bytes, /*wait=*/true);
  }

  bool TryRecv(int peer, int tag, std::string* bytes, int* source) override {
    CheckPeerAndTag(peer, tag, true);
    const int s = RecvRaw(peer, tag, bytes, /*wait=*/false);
    if (s < 0) return false;
    if (source != nullptr) *source = s;
    return true;
  }

  void Barrier() override {
    for (int r = 0; r < size(); ++r) {
      if (r != rank_) SendRaw(r, kCollectiveTag, nullptr, 0);
    }
    std::string scratch;
    for (int r = 0; r < size(); ++r) {
      if (r != rank_) RecvRaw(r, kCollectiveTag, &scratch, true);
    }
  }

  void AllReduceSum(const Tensor& data) override {
    CheckCpuFloat(data);
    const int64_t n = data.numel();
    std::vector<int64_t> counts(size());
    for (int r = 0; r < size(); ++r) counts[r] = n * (r + 1) / size() - n * r / size();
    const std::vector<int64_t> offsets = Offsets(counts);
    std::vector<float> mine(counts[rank_]);
    Tensor mine_view(mine.data(), Shape{counts[rank_]});
    ReduceScatterSum(data, counts, mine_view);
    AllGather(mine_view, counts, data);
  }

  void ReduceScatterSum(const Tensor& in, const std::vector<int64_t>& counts,
                        const Tensor& out) override {
    CheckCpuFloat(in);
    CheckCpuFloat(out);
    const std::vector<int64_t> offsets = CheckCounts(counts, in.numel(), out.numel());
    const float* src = in.f32();
    for (int r = 0; r < size(); ++r) {
      if (r != rank_) SendRaw(r, kCollectiveTag, src + offsets[r], counts[r] * sizeof(float));
    }
    // Sum the pieces in rank order (deterministic, the same order a reference would use).
    float* dst = out.f32();
    const int64_t n = counts[rank_];
    std::string piece;
    for (int r = 0; r < size(); ++r) {
      const float* p;
      if (r == rank_) {
        p = src + offsets[rank_];
      } else {
        RecvRaw(r, kCollectiveTag, &piece, true);
        CHECK_EQ(piece.size(), n * sizeof(float));
        p = reinterpret_cast<const float*>(piece.data());
      }
      if (r == 0) {
        if (dst != p && n > 0) std::memmove(dst, p, n * sizeof(float));
      } else {
        for (int64_t i = 0; i < n; ++i) dst[i] += p[i];
      }
    }
  }

  void AllGather(const Tensor& in, const std::vector<int64_t>& counts, const Tensor& out) override {
    CheckCpuFloat(in);
    CheckCpuFloat(out);
    const std::vector<int64_t> offsets = CheckCounts(counts, out.numel(), in.numel());
    for (int r = 0; r < size(); ++r) {
      if (r != rank_) SendRaw(r, kCollectiveTag, in.f32(), in.bytes());
    }
    if (in.bytes() > 0) std::memmove(out.f32() + offsets[rank_], in.f32(), in.bytes());
    std::string piece;
    for (int r = 0; r < size(); ++r) {
      if (r == rank_) continue;
      RecvRaw(r, kCollectiveTag, &piece, true);
      CHECK_EQ(piece.size(), counts[r] * sizeof(float));
      if (!piece.empty()) std::memcpy(out.f32() + offsets[r], piece.data(), piece.size());
    }
  }

  void Broadcast(void* data, size_t bytes, int root) override {
    CHECK(root >= 0 && root < size());
    if (rank_ == root) {
      for (int r = 0; r < size(); ++r) {
        if (r != rank_) SendRaw(r, kCollectiveTag, data, bytes);
      }
      return;
    }
    std::string piece;
    RecvRaw(root, kCollectiveTag, &piece, true);
    CHECK_EQ(piece.size(), bytes) << "Broadcast sizes differ between ranks";
    if (bytes > 0) std::memcpy(data, piece.data(), bytes);
  }

 private:
  void SendRaw(int peer, int tag, const void* data, size_t bytes) {
    Envelope e{rank_, tag,
               bytes == 0 ? std::string() : std::string(static_cast<const char*>(data), bytes)};
    Mailbox& box = world_->mailboxes[peer];
    {
      std::lock_guard<std::mutex> lock(box.mu);
      box.queue.push_back(std::move(e));
    }
    box.arrived.notify_all();
  }

  // Returns the source, or -1 when !wait and nothing matches.
  int RecvRaw(int peer, int tag, std::string* bytes, bool wait) {
    Mailbox& box = world_->mailboxes[rank_];
    std::unique_lock<std::mutex> lock(box.mu);
    for (;;) {
      for (auto it = box.queue.begin(); it != box.queue.end(); ++it) {
        if (it->tag == tag && (peer == kAnySource || it->source == peer)) {
          const int source = it->source;
          bytes->swap(it->bytes);
          box.queue.erase(it);
          return source;
        }
      }
      if (!wait) return -1;
      if (world_->aborted) Fail("in-process rank ", rank_, ": another rank failed");
      box.arrived.wait(lock);
    }
  }

  static void CheckCpuFloat(const Tensor& t) {
    CHECK(t.defined() && t.dtype() == DType::kFloat32 && t.device() == Device::kCpu)
        << "in-process collectives take CPU float32 tensors";
  }

  std::vector<int64_t> CheckCounts(const std::vector<int64_t>& counts, int64_t total,
                                   int64_t mine) const {
    CHECK_EQ(static_cast<int>(counts.size()), size());
    std::vector<int64_t> offsets = Offsets(counts);
    CHECK_EQ(offsets.back(), total);
    CHECK_EQ(counts[rank_], mine);
    return offsets;
  }

  InProcessWorld::State* world_;
  int rank_;
};

}  // namespace

InProcessWorld::InProcessWorld(int size) : state_(std::make_unique<State>(size)) {
  CHECK_GE(size, 1);
  for (int r = 0; r < size; ++r) {
    ranks_.push_back(std::make_unique<InProcessCommunicator>(state_.get(), r));
  }
}

InProcessWorld::~InProcessWorld() = default;

void InProcessWorld::Abort() { state_->Abort(); }

int InProcessWorld::size() const { return static_cast<int>(ranks_.size()); }

Communicator* InProcessWorld::rank(int r) const {
  CHECK(r >= 0 && r < size());
  return ranks_[r].get();
}

void RunInProcess(int size, const std::function<void(Communicator& comm)>& body) {
  InProcessWorld world(size);
  std::vector<std::exception_ptr> errors(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(*world.rank(r));
      } catch (...) {
        errors[r] = std::current_exception();
        world.Abort();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace tern::comm
