// The byte layout of optimizer state, shared by the optimizers: a fixed header (magic, version,
// kind, size, steps) followed by the float32 buffers. Internal to optim/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tern::optim::internal {

enum class StateKind : uint32_t { kAdam = 1, kSgd = 2 };

std::string EncodeState(StateKind kind, int64_t size, int64_t steps,
                        const std::vector<const std::vector<float>*>& buffers);
// Checks magic, version, kind, size and length; throws tern::Error naming what is wrong.
void DecodeState(const std::string& bytes, StateKind kind, int64_t size, int64_t* steps,
                 const std::vector<std::vector<float>*>& buffers);

}  // namespace tern::optim::internal
