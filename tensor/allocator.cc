#include "tensor/allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "common/error.h"
#include "tensor/cuda_backend.h"

namespace tern {
namespace {

class CpuAllocator : public Allocator {
 public:
  void* Allocate(size_t bytes) override {
    size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
    if (p == nullptr) Fail("out of host memory allocating ", bytes, " bytes");
    return p;
  }
  void Free(void* ptr) override { std::free(ptr); }
  Device device() const override { return Device::kCpu; }
};

}  // namespace

Allocator* AllocatorFor(Device device) {
  static CpuAllocator cpu;
  if (device == Device::kCpu) return &cpu;
  Allocator* gpu = cuda::DeviceAllocator();
  if (gpu == nullptr) Fail("this build of Tern has no CUDA backend (device cuda requested)");
  return gpu;
}

Allocator* PinnedHostAllocator() {
  Allocator* pinned = cuda::DeviceAvailable() ? cuda::PinnedAllocator() : nullptr;
  return pinned != nullptr ? pinned : AllocatorFor(Device::kCpu);
}

bool CudaAvailable() { return cuda::DeviceAvailable(); }

int CudaDeviceCount() { return cuda::DeviceAvailable() ? cuda::DeviceCount() : 0; }

void SelectCudaDevice(int ordinal) {
  const int count = CudaDeviceCount();
  if (ordinal < 0 || ordinal >= count)
    Fail("CUDA device ", ordinal, " requested but ", count, " GPU(s) are visible");
  cuda::SetDevice(ordinal);
}

std::string CudaBusId(int ordinal) {
  if (ordinal < 0 || ordinal >= CudaDeviceCount())
    Fail("CUDA device ", ordinal, " requested but ", CudaDeviceCount(), " GPU(s) are visible");
  return cuda::BusId(ordinal);
}

void* CudaKernelStream() { return cuda::KernelStream(); }

void CopyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
  } else {
    cuda::Copy(dst, dst_device, src, src_device, bytes);
  }
}

int64_t DeviceDrains() { return cuda::SynchronizeCount(); }

void CopyToDeviceAsync(void* dst, Device dst_device, const void* pinned_src, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu) {
    std::memcpy(dst, pinned_src, bytes);
  } else {
    cuda::CopyToDeviceAsync(dst, pinned_src, bytes);
  }
}

DeviceFence::~DeviceFence() {
  if (event_ != nullptr) cuda::EventDestroy(event_);
}

void DeviceFence::Record() {
  if (!cuda::DeviceAvailable()) return;
  if (event_ == nullptr) event_ = cuda::EventCreate();
  cuda::EventRecord(event_);
  recorded_ = true;
}

void DeviceFence::Wait() {
  if (recorded_) cuda::EventWait(event_);
}

}  // namespace tern
