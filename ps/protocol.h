// Wire format of parameter-server messages (same-architecture ranks; host byte order).
//   request  = RequestHeader, then sparse: count int32 indices and count float32 values |
//              dense, pull, stop: nothing. A dense request's count float32 follow as the next
//              message (same source and tag), sent straight from the gradient and received
//              straight into the server's buffer: no copy into or out of a message buffer.
//   reply    = uint64 version; then, as the next message, the shard's float32 parameters
//              (received straight into the worker's staging buffer).
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

// Checks sizes against the header (a malformed message is a bug: CHECK).
struct Request {
  RequestHeader header;
  SparseGradient sparse;
  optim::StepOptions options() const;
};
Request DecodeRequest(const std::string& bytes, int64_t shard_size);

}  // namespace tern::ps::protocol
