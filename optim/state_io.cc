// Optimizer state serialization (see state_io.h).
#include "optim/state_io.h"

#include <cstring>

#include "common/error.h"

namespace tern::optim::internal {
namespace {

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

}  // namespace

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
