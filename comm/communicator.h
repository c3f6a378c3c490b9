// The Communicator: how ranks of a training job talk. Point-to-point byte messages (for the
// parameter server's pushes and pulls) and float32 collectives (for synchronous SGD).
//
// Implementations: MPI (mpi_communicator.h, between processes), in-process threads
// (in_process.h, N ranks in one process, for tests) and NCCL (nccl_communicator.h, collectives
// on CUDA buffers). Choose one with the factory functions in those headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace tern::comm {

inline constexpr int kAnySource = -1;
// Tags callers may use are [0, kMaxUserTag); larger tags are reserved for collectives.
inline constexpr int kMaxUserTag = 1 << 20;

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // ---- Point to point. Thread-safe: any thread may send and receive at any time. Messages from
  // one source with one tag arrive in the order they were sent.

  // Returns once `data` may be reused. It may block until the peer receives (MPI's rendezvous
  // protocol for large messages), so a rank that is sent to unprompted must keep a thread
  // receiving. REQUIRES: 0 <= peer < size(), 0 <= tag < kMaxUserTag.
  virtual void Send(int peer, int tag, const void* data, size_t bytes) = 0;
  void Send(int peer, int tag, std::string_view bytes) {
    Send(peer, tag, bytes.data(), bytes.size());
  }
  // Blocks until a message with `tag` from `peer` (any peer for kAnySource) has arrived, puts
  // its bytes in *bytes (reusing its capacity) and returns the sender's rank.
  virtual int Recv(int peer, int tag, std::string* bytes) = 0;
  // Like Recv but returns false at once when no matching message has arrived yet.
  virtual bool TryRecv(int peer, int tag, std::string* bytes, int* source) = 0;
  // Like Recv from one peer, but straight into `data`, saving a copy of large payloads. The
  // message must be exactly `bytes` long (anything else is a protocol bug: CHECK).
  // REQUIRES: 0 <= peer < size().
  virtual void RecvInto(int peer, int tag, void* data, size_t bytes);

  // ---- Collectives. Every rank calls them in the same order, from one thread per rank.
  // Buffers are 1-D float32 tensors: CPU for MPI and in-process, CUDA for NCCL. MPI and
  // in-process calls return with the result in place; NCCL's are queued on the calling thread's
  // tensor kernels' stream, ordered with its kernels and copies, and return at once.
  virtual void Barrier() = 0;
  // data (n) = Σ_ranks data, in place.
  virtual void AllReduceSum(const Tensor& data) = 0;
  // in (Σ counts) is summed over ranks; out (counts[rank]) gets this rank's range, the ranges
  // laid out in rank order. REQUIRES: counts.size() == size().
  virtual void ReduceScatterSum(const Tensor& in, const std::vector<int64_t>& counts,
                                const Tensor& out) = 0;
  // in (counts[rank]); out (Σ counts) gets every rank's range in rank order.
  virtual void AllGather(const Tensor& in, const std::vector<int64_t>& counts,
                         const Tensor& out) = 0;
  // Host bytes from `root` to every rank (sizes must agree on all ranks).
  virtual void Broadcast(void* data, size_t bytes, int root) = 0;

 protected:
  Communicator() = default;
  void CheckPeerAndTag(int peer, int tag, bool allow_any_source) const;
};

// Offsets of the ranges `counts` lays out in rank order: (size + 1) values, last = Σ counts.
std::vector<int64_t> Offsets(const std::vector<int64_t>& counts);

}  // namespace tern::comm
