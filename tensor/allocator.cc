#include "tensor/allocator.h"

#include <atomic>
#include <cmath>
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

const GpuBackend& ActiveGpuBackend() {
  static const GpuBackend& backend = GpuEmulated() ? emulated_gpu::Backend() : cuda::Backend();
  return backend;
}

void FailOutOfDeviceMemory(size_t requested, size_t held) {
  auto mib = [](size_t bytes) { return StrCat(std::ceil(bytes / 104857.6) / 10, " MiB"); };
  Fail("GPU out of memory: ", mib(requested), " more asked with ", mib(held),
       " held by Tern; lower the batch (data.batch_tokens for tern-train, --max-batch-tokens for "
       "tern-translate) or the model's size");
}

Allocator* AllocatorFor(Device device) {
  static CpuAllocator cpu;
  if (device == Device::kCpu) return &cpu;
  Allocator* gpu = ActiveGpuBackend().device_allocator();
  if (gpu == nullptr) Fail("this build of Tern has no CUDA backend (device cuda requested)");
  return gpu;
}

Allocator* PinnedHostAllocator() {
  Allocator* pinned = CudaAvailable() ? ActiveGpuBackend().pinned_allocator() : nullptr;
  return pinned != nullptr ? pinned : AllocatorFor(Device::kCpu);
}

bool CudaAvailable() { return ActiveGpuBackend().device_available(); }

int CudaDeviceCount() { return CudaAvailable() ? ActiveGpuBackend().device_count() : 0; }

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
  ActiveGpuBackend().set_device(ordinal);
}

std::string CudaBusId(int ordinal) {
  if (ordinal < 0 || ordinal >= CudaDeviceCount())
    Fail("CUDA device ", ordinal, " requested but ", CudaDeviceCount(), " GPU(s) are visible");
  return ActiveGpuBackend().bus_id(ordinal);
}

void* CudaKernelStream() { return ActiveGpuBackend().kernel_stream(); }

namespace {
std::atomic<int64_t> device_copies{0};
}  // namespace

void CopyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
  } else {
    device_copies.fetch_add(1, std::memory_order_relaxed);
    ActiveGpuBackend().copy(dst, dst_device, src, src_device, bytes);
  }
}

int64_t DeviceCopies() { return device_copies.load(std::memory_order_relaxed); }

int64_t DeviceDrains() { return ActiveGpuBackend().synchronize_count(); }

void CopyToDeviceAsync(void* dst, Device dst_device, const void* pinned_src, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu) {
    std::memcpy(dst, pinned_src, bytes);
  } else {
    device_copies.fetch_add(1, std::memory_order_relaxed);
    ActiveGpuBackend().copy_to_device_async(dst, pinned_src, bytes);
  }
}

void ZeroBytes(void* dst, Device device, size_t bytes) {
  if (bytes == 0) return;
  if (device == Device::kCpu) {
    std::memset(dst, 0, bytes);
  } else {
    device_copies.fetch_add(1, std::memory_order_relaxed);  // a launch, as the copy it replaces
    ActiveGpuBackend().zero_async(dst, bytes);
  }
}

DeviceFence::~DeviceFence() {
  if (event_ != nullptr) ActiveGpuBackend().event_destroy(event_);
}

void DeviceFence::Record() {
  if (!CudaAvailable()) return;
  if (event_ == nullptr) event_ = ActiveGpuBackend().event_create();
  ActiveGpuBackend().event_record(event_);
  recorded_ = true;
}

void DeviceFence::Wait() {
  if (recorded_) ActiveGpuBackend().event_wait(event_);
}

}  // namespace tern
