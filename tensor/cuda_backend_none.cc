// Built when there is no CUDA toolkit: the CUDA device reports itself absent.
#include "common/error.h"
#include "tensor/cuda_backend.h"

namespace tern::cuda {

Allocator* DeviceAllocator() { return nullptr; }
Allocator* PinnedAllocator() { return nullptr; }
bool DeviceAvailable() { return false; }
int DeviceCount() { return 0; }
void SetDevice(int) {
  Fail("this build of Tern has no CUDA backend; rebuild with the CUDA toolkit installed");
}
void Synchronize() {}
int64_t SynchronizeCount() { return 0; }
void* KernelStream() { return nullptr; }
std::string BusId(int) { return ""; }
void Copy(void*, Device, const void*, Device, size_t) {
  Fail("this build of Tern has no CUDA backend; rebuild with the CUDA toolkit installed");
}
void CopyToDeviceAsync(void*, const void*, size_t) {
  Fail("this build of Tern has no CUDA backend; rebuild with the CUDA toolkit installed");
}
void ZeroAsync(void*, size_t) {
  Fail("this build of Tern has no CUDA backend; rebuild with the CUDA toolkit installed");
}
void* EventCreate() { return nullptr; }
void EventRecord(void*) {}
void EventWait(void*) {}
void EventDestroy(void*) {}
const KernelTable* Kernels() { return nullptr; }
}  // namespace tern::cuda
