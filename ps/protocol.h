// Wire format of parameter-server messages (same-architecture ranks; host byte order).
//   request  = RequestHeader, then sparse: count int32 indices and count float32 values |
//              dense, pull, stop: nothing. A dense request's count float32 follow as the next
//              message (same source and tag), sent straight from the gradient and received
//              straight into the server's buffer: no copy into or out of a message buffer.
//   reply    = dense: uint64 version; then, as the next message, the shard's float32 parameters
//              (received straight into the worker's staging buffer) |
//              sparse (dropped pulls, ps/pull_drop.h; the answer to a sparse push):
//              SparseReplyHeader; then, when count > 0, as the next message count int32
//              positions and count float32 values. The first message's size tells them apart.
#pragma once

#include <cstdint>
#include <string>

#include "optim/optimizer.h"
#include "ps/shard.h"

namespace tern::ps::protocol {

inline constexpr int kTagRequest = 100;  // worker -> shard owner's server thread
inline constexpr int kTagReply = 101;    // server -> worker's communication thread

enum class Kind : uint32_t { kDense = 1, kSparse = 2, kPull = 3, kStop = 4 };

struct RequestHeader {
  Kind kind;
  uint32_t reserved;
  uint64_t base_version;  // shard version the gradient was computed on
  float learning_rate, beta1, beta2, grad_scale;
  int64_t count;
};

// The header of a dense push of `count` floats (the payload is its own message).
void EncodeDense(const optim::StepOptions& o, uint64_t base_version, int64_t count,
                 std::string* out);
void EncodeSparse(const optim::StepOptions& o, uint64_t base_version, const SparseGradient& g,
                  std::string* out);
void EncodeControl(Kind kind, std::string* out);

struct SparseReplyHeader {
  uint64_t version;
  int64_t count;
};
inline constexpr size_t kDenseReplyHeaderBytes = sizeof(uint64_t);
static_assert(sizeof(SparseReplyHeader) != kDenseReplyHeaderBytes);

// A sparse reply: the header message, then the payload message (empty when count is 0).
void EncodeSparseReply(uint64_t version, const SparseGradient& values, std::string* header,
                       std::string* payload);
// The payload of a sparse reply into out[index] = value for each entry (out: the shard's
// part of the worker's staging buffer, shard_size long). Checks sizes and positions.
void ApplySparseReplyPayload(const std::string& payload, int64_t count, int64_t shard_size,
                             float* out);

// Checks sizes against the header (a malformed message is a bug: CHECK).
struct Request {
  RequestHeader header;
  SparseGradient sparse;
  optim::StepOptions options() const;
};
Request DecodeRequest(const std::string& bytes, int64_t shard_size);

}  // namespace tern::ps::protocol
