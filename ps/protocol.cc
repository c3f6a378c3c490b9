// Parameter-server message encoding (see protocol.h).
#include "ps/protocol.h"

#include <glog/logging.h>

#include <cstring>

namespace tern::ps::protocol {
namespace {

RequestHeader Header(Kind kind, const optim::StepOptions& o, uint64_t base, int64_t count) {
  return RequestHeader{kind, 0, base, o.learning_rate, o.beta1, o.beta2, o.grad_scale, count};
}

}  // namespace

void EncodeDense(const optim::StepOptions& o, uint64_t base_version, int64_t count,
                 std::string* out) {
  const RequestHeader h = Header(Kind::kDense, o, base_version, count);
  out->assign(reinterpret_cast<const char*>(&h), sizeof(h));
}

void EncodeSparse(const optim::StepOptions& o, uint64_t base_version, const SparseGradient& g,
                  std::string* out) {
  const int64_t count = static_cast<int64_t>(g.indices.size());
  const RequestHeader h = Header(Kind::kSparse, o, base_version, count);
  out->resize(sizeof(h) + count * (sizeof(int32_t) + sizeof(float)));
  char* p = out->data();
  std::memcpy(p, &h, sizeof(h));
  if (count == 0) return;  // (empty vectors may hold null data)
  std::memcpy(p + sizeof(h), g.indices.data(), count * sizeof(int32_t));
  std::memcpy(p + sizeof(h) + count * sizeof(int32_t), g.values.data(), count * sizeof(float));
}

void EncodeControl(Kind kind, std::string* out) {
  const RequestHeader h = Header(kind, optim::StepOptions{}, 0, 0);
  out->assign(reinterpret_cast<const char*>(&h), sizeof(h));
}

void EncodeSparseReply(uint64_t version, const SparseGradient& values, std::string* header,
                       std::string* payload) {
  const int64_t count = static_cast<int64_t>(values.indices.size());
  CHECK_EQ(values.values.size(), values.indices.size());
  const SparseReplyHeader h{version, count};
  header->assign(reinterpret_cast<const char*>(&h), sizeof(h));
  payload->resize(count * (sizeof(int32_t) + sizeof(float)));
  if (count == 0) return;
  std::memcpy(payload->data(), values.indices.data(), count * sizeof(int32_t));
  std::memcpy(payload->data() + count * sizeof(int32_t), values.values.data(),
              count * sizeof(float));
}

void ApplySparseReplyPayload(const std::string& payload, int64_t count, int64_t shard_size,
                             float* out) {
  CHECK(count >= 0 && count <= shard_size) << "sparse reply of " << count << " entries";
  CHECK_EQ(payload.size(), count * (sizeof(int32_t) + sizeof(float)));
  const char* p = payload.data();
  for (int64_t k = 0; k < count; ++k) {
    int32_t i;
    float v;
    std::memcpy(&i, p + k * sizeof(int32_t), sizeof(i));
    std::memcpy(&v, p + count * sizeof(int32_t) + k * sizeof(float), sizeof(v));
    CHECK(i >= 0 && i < shard_size) << "sparse reply position " << i;
    out[i] = v;
  }
}

optim::StepOptions Request::options() const {
  optim::StepOptions o;
  o.learning_rate = header.learning_rate;
  o.beta1 = header.beta1;
  o.beta2 = header.beta2;
  o.grad_scale = header.grad_scale;
  return o;
}

Request DecodeRequest(const std::string& bytes, int64_t shard_size) {
  Request r;
  CHECK_GE(bytes.size(), sizeof(RequestHeader)) << "truncated parameter-server request";
  std::memcpy(&r.header, bytes.data(), sizeof(RequestHeader));
  const char* payload = bytes.data() + sizeof(RequestHeader);
  const int64_t count = r.header.count;
  switch (r.header.kind) {
    case Kind::kDense:
      CHECK_EQ(count, shard_size) << "dense push of the wrong shard size";
      CHECK_EQ(bytes.size(), sizeof(RequestHeader)) << "the dense payload is its own message";
      break;
    case Kind::kSparse:
      CHECK(count >= 0 && count <= shard_size);
      CHECK_EQ(bytes.size(), sizeof(RequestHeader) + count * (sizeof(int32_t) + sizeof(float)));
      r.sparse.indices.resize(count);
      r.sparse.values.resize(count);
      if (count == 0) break;
      std::memcpy(r.sparse.indices.data(), payload, count * sizeof(int32_t));
      std::memcpy(r.sparse.values.data(), payload + count * sizeof(int32_t), count * sizeof(float));
      break;
    case Kind::kPull:
    case Kind::kStop:
      break;
    default:
      LOG(FATAL) << "unknown parameter-server request kind "
                 << static_cast<uint32_t>(r.header.kind);
  }
  return r;
}

}  // namespace tern::ps::protocol
