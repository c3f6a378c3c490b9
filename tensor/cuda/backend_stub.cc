// Placeholder until the CUDA backend lands: behaves as a build without CUDA.
#include "common/error.h"
#include "tensor/cuda_backend.h"

namespace tern::cuda {

Allocator* DeviceAllocator() { return nullptr; }
bool DeviceAvailable() { return false; }
void Copy(void*, Device, const void*, Device, size_t) {
  Fail("the CUDA backend is not built yet");
}
const KernelTable* Kernels() { return nullptr; }

}  // namespace tern::cuda
