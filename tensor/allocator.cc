#include "tensor/allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "common/error.h"
#include "tensor/cuda_backend.h"
#include "tensor/emulated_gpu.h"

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
  Allocator* gpu =
      emulated_gpu::Enabled() ? emulated_gpu::DeviceAllocator() : cuda::DeviceAllocator();
  if (gpu == nullptr) Fail("this build of Tern has no CUDA backend (device cuda requested)");
  return gpu;
}

Allocator* PinnedHostAllocator() {
  Allocator* pinned = CudaAvailable() && !GpuEmulated() ? cuda::PinnedAllocator() : nullptr;
  return pinned != nullptr ? pinned : AllocatorFor(Device::kCpu);
}

bool CudaAvailable() { return GpuEmulated() || cuda::DeviceAvailable(); }

int CudaDeviceCount() {
  if (GpuEmulated()) return emulated_gpu::DeviceCount();
  return cuda::DeviceAvailable() ? cuda::DeviceCount() : 0;
}

bool GpuEmulated() { return emulated_gpu::Enabled(); }

void EnqueueOnEmulatedGpu(const std::vector<Tensor>& tensors,
                          std::function<void(const std::vector<Tensor>&)> op) {
  CHECK(GpuEmulated()) << "EnqueueOnEmulatedGpu without TERN_EMULATE_GPU=1";
  emulated_gpu::Enqueue(tensors, std::move(op), "EnqueueOnEmulatedGpu");
}

void SelectCudaDevice(int ordinal) {
  const int count = CudaDeviceCount();
  if (ordinal < 0 || ordinal >= count)
    Fail("CUDA device ", ordinal, " requested but ", count, " GPU(s) are visible");
  if (!GpuEmulated()) cuda::SetDevice(ordinal);
}

std::string CudaBusId(int ordinal) {
  if (ordinal < 0 || ordinal >= CudaDeviceCount())
    Fail("CUDA device ", ordinal, " requested but ", CudaDeviceCount(), " GPU(s) are visible");
  return GpuEmulated() ? emulated_gpu::BusId(ordinal) : cuda::BusId(ordinal);
}

void* CudaKernelStream() { return GpuEmulated() ? nullptr : cuda::KernelStream(); }

void CopyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
  } else {
    if (GpuEmulated()) {
      emulated_gpu::Copy(dst, dst_device, src, src_device, bytes);
    } else {
      cuda::Copy(dst, dst_device, src, src_device, bytes);
    }
  }
}

int64_t DeviceDrains() {
  return GpuEmulated() ? emulated_gpu::SynchronizeCount() : cuda::SynchronizeCount();
}

void CopyToDeviceAsync(void* dst, Device dst_device, const void* pinned_src, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu) {
    std::memcpy(dst, pinned_src, bytes);
  } else {
    if (GpuEmulated()) {
      emulated_gpu::CopyToDeviceAsync(dst, pinned_src, bytes);
    } else {
      cuda::CopyToDeviceAsync(dst, pinned_src, bytes);
    }
  }
}

DeviceFence::~DeviceFence() {
  if (event_ == nullptr) return;
  if (GpuEmulated()) {
    emulated_gpu::EventDestroy(event_);
  } else {
    cuda::EventDestroy(event_);
  }
}

void DeviceFence::Record() {
  if (!CudaAvailable()) return;
  if (GpuEmulated()) {
    if (event_ == nullptr) event_ = emulated_gpu::EventCreate();
    emulated_gpu::EventRecord(event_);
  } else {
    if (event_ == nullptr) event_ = cuda::EventCreate();
    cuda::EventRecord(event_);
  }
  recorded_ = true;
}

void DeviceFence::Wait() {
  if (!recorded_) return;
  if (GpuEmulated()) {
    emulated_gpu::EventWait(event_);
  } else {
    cuda::EventWait(event_);
  }
}

}  // namespace tern
