// Optimizer state serialization (see state_io.h).
#include "optim/state_io.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "optim/optimizer.h"
#include "tensor/ops.h"

namespace tern::optim::internal {

Tensor StateBuffer::On(Device device) {
  const int64_t n = static_cast<int64_t>(host_.size());
  if (device == Device::kCpu) {
    CHECK(!device_.defined()) << "an optimizer stepped spans on two devices";
    return Tensor(host_.data(), Shape{n});
  }
  if (!device_.defined() && zeros_) {
    device_ = Tensor::Zeros(Shape{n}, DType::kFloat32, device);
  } else if (!device_.defined()) {
    device_ = Tensor::Empty(Shape{n}, DType::kFloat32, device);
    Copy(Tensor(host_.data(), Shape{n}), device_);
  }
  CHECK(device_.device() == device) << "an optimizer stepped spans on two devices";
  return device_;
}

const std::vector<float>& StateBuffer::Host() const {
  if (device_.defined()) Copy(device_, Tensor(host_.data(), Shape{device_.numel()}));
  return host_;
}

void StateBuffer::Written() {
  if (device_.defined()) Copy(Tensor(host_.data(), Shape{device_.numel()}), device_);
}

constexpr uint32_t kMagic = 0x54504f54;  // "TOPT"
constexpr uint32_t kVersion = 1;

struct Header {
  uint32_t magic;
  uint32_t version;
  uint32_t kind;
  uint32_t num_buffers;
  int64_t size;
  int64_t steps;
};

std::string EncodeState(StateKind kind, int64_t size, int64_t steps,
                        const std::vector<const std::vector<float>*>& buffers) {
  Header h{kMagic, kVersion, static_cast<uint32_t>(kind), static_cast<uint32_t>(buffers.size()),
           size,   steps};
  std::string out(sizeof(h) + buffers.size() * size * sizeof(float), '\0');
  std::memcpy(out.data(), &h, sizeof(h));
  char* p = out.data() + sizeof(h);
  for (const std::vector<float>* b : buffers) {
    CHECK_EQ(static_cast<int64_t>(b->size()), size);
    std::memcpy(p, b->data(), size * sizeof(float));
    p += size * sizeof(float);
  }
  return out;
}

void DecodeState(const std::string& bytes, StateKind kind, int64_t size, int64_t* steps,
                 const std::vector<std::vector<float>*>& buffers) {
  Header h;
  if (bytes.size() < sizeof(h)) Fail("optimizer state: ", bytes.size(), " bytes is too short");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != kMagic) Fail("optimizer state: bad magic number (not optimizer state)");
  if (h.version != kVersion) {
    Fail("optimizer state: format version ", h.version, " is not supported (expected ", kVersion,
         ")");
  }
  if (h.kind != static_cast<uint32_t>(kind)) {
    Fail("optimizer state: saved by optimizer kind ", h.kind, ", loading into kind ",
         static_cast<uint32_t>(kind), "; use the same optim.optimizer as the checkpoint");
  }
  if (h.size != size) {
    Fail("optimizer state: holds ", h.size, " parameters, this optimizer has ", size,
         " (a different model or shard map)");
  }
  const size_t expected = sizeof(h) + buffers.size() * size * sizeof(float);
  if (h.num_buffers != buffers.size() || bytes.size() != expected || h.steps < 0) {
    Fail("optimizer state: ", bytes.size(), " bytes, expected ", expected, " (truncated?)");
  }
  const char* p = bytes.data() + sizeof(h);
  for (std::vector<float>* b : buffers) {
    b->resize(size);
    std::memcpy(b->data(), p, size * sizeof(float));
    p += size * sizeof(float);
  }
  *steps = h.steps;
}

}  // namespace tern::optim::internal

namespace tern::optim {
namespace {

// The header of `bytes`, checked against its length.
internal::Header CheckedHeader(const std::string& bytes) {
  internal::Header h;
  if (bytes.size() < sizeof(h)) Fail("optimizer state: ", bytes.size(), " bytes is too short");
  std::memcpy(&h, bytes.data(), sizeof(h));
  if (h.magic != internal::kMagic || h.version != internal::kVersion || h.size < 0 ||
      bytes.size() != sizeof(h) + h.num_buffers * h.size * sizeof(float)) {
    Fail("optimizer state: malformed (", bytes.size(), " bytes)");
  }
  return h;
}

}  // namespace

std::string JoinStates(const std::vector<std::string>& parts) {
  CHECK(!parts.empty());
  internal::Header joined = CheckedHeader(parts[0]);
  joined.size = 0;
  for (const std::string& part : parts) {
    const internal::Header h = CheckedHeader(part);
    if (h.kind != joined.kind || h.num_buffers != joined.num_buffers)
      Fail("optimizer state: shards saved by different optimizers cannot be joined");
    joined.size += h.size;
    joined.steps = std::max(joined.steps, h.steps);
  }
  std::string out(sizeof(joined) + joined.num_buffers * joined.size * sizeof(float), '\0');
  std::memcpy(out.data(), &joined, sizeof(joined));
  // Buffer b of the join is buffer b of every part, one after another.
  char* p = out.data() + sizeof(joined);
  for (uint32_t b = 0; b < joined.num_buffers; ++b) {
    for (const std::string& part : parts) {
      const internal::Header h = CheckedHeader(part);
      const size_t bytes = h.size * sizeof(float);
      std::memcpy(p, part.data() + sizeof(h) + b * bytes, bytes);
      p += bytes;
    }
  }
  return out;
}

std::string SliceState(const std::string& bytes, int64_t begin, int64_t end) {
  internal::Header h = CheckedHeader(bytes);
  CHECK(0 <= begin && begin <= end && end <= h.size) << begin << ".." << end << " of " << h.size;
  const int64_t size = h.size;
  h.size = end - begin;
  std::string out(sizeof(h) + h.num_buffers * h.size * sizeof(float), '\0');
  std::memcpy(out.data(), &h, sizeof(h));
  for (uint32_t b = 0; b < h.num_buffers; ++b) {
    std::memcpy(out.data() + sizeof(h) + b * h.size * sizeof(float),
                bytes.data() + sizeof(h) + (b * size + begin) * sizeof(float),
                h.size * sizeof(float));
  }
  return out;
}

}  // namespace tern::optim
