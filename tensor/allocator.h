// Device allocators. The CPU one returns 64-byte aligned memory; the CUDA one (tensor/cuda/) is
// registered only in CUDA builds.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tern {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual Device device() const = 0;
};

constexpr size_t kAlignment = 64;

// Throws tern::Error for a device this build has no backend for.
Allocator* AllocatorFor(Device device);

// Page-locked host memory (device() kCpu) where a GPU is visible, so that copies between it and
// the GPU need no staging; the CPU allocator otherwise.
Allocator* PinnedHostAllocator();

// True when this build has a CUDA backend and a GPU is visible, or the GPU is emulated.
bool CudaAvailable();
// The emulated GPU (tensor/emulated_gpu.h), for tests of the GPU code paths where there is no
// GPU: with TERN_EMULATE_GPU=1 in the environment, Device::kCuda is memory the host cannot
// address, the CPU's kernels run on it when the host waits for them, and every wait a GPU would
// make the host do is counted in DeviceDrains(). It replaces a real GPU where there is one; it
// has no NCCL.
bool GpuEmulated();
// Queues op on the emulated GPU, after the work queued before it, to run with host views of
// `tensors` (CPU tensors over their memory, in order): for a GPU entry point outside tensor/
// (inference's fused top-k) to run its CPU counterpart there. REQUIRES: GpuEmulated(); each
// tensor undefined or on kCuda.
void EnqueueOnEmulatedGpu(const std::vector<Tensor>& tensors,
                          std::function<void(const std::vector<Tensor>&)> op);
// GPUs visible to this process; 0 where CudaAvailable() is false.
int CudaDeviceCount();
// Binds the process to GPU `ordinal` (< CudaDeviceCount()). Call before the first CUDA tensor:
// the device pool, stream and cuBLAS handle belong to the GPU current when they are made.
void SelectCudaDevice(int ordinal);
// The PCI bus id of GPU `ordinal`: two processes on one host see the same GPU when these match.
std::string CudaBusId(int ordinal);
// The tensor kernels' CUDA stream on this thread (a cudaStream_t), for a library that queues its
// own work there (NCCL), ordered with the kernels' without the host waiting; nullptr without a
// CUDA backend.
void* CudaKernelStream();

// Times the host waited for the GPU's whole queue since the process started (a copy to or from
// the host, SumSquares): 0 without a GPU. For tests that a training step
// queues on without waiting.
int64_t DeviceDrains();

// Copies bytes between any two devices (host<->device, device<->device).
void CopyBytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Copies involving a GPU since the process started (CopyBytes', CopyToDeviceAsync's, and
// ZeroBytes' fills): each a launch, counted in DeviceOps (tensor/ops.h).
int64_t DeviceCopies();

// Queues a copy from page-locked host memory (Tensor::PinnedZeros) to `dst` on `dst_device` and
// returns without waiting (CopyBytes waits: its host side may be a temporary). The host bytes
// must stay as they are until the device has read them: record a DeviceFence after this call and
// Wait on it before writing them again. On the CPU a plain copy.
void CopyToDeviceAsync(void* dst, Device dst_device, const void* pinned_src, size_t bytes);

// Zeroes `bytes` at `dst` on `device`: on a GPU queued on the current stream, not waited for.
void ZeroBytes(void* dst, Device device, size_t bytes);

// A point in the GPU's queue of work (a CUDA event). Record() marks the work queued so far;
// Wait() returns once the GPU has done it (at once when nothing was recorded). No-ops where no
// GPU is visible.
class DeviceFence {
 public:
  DeviceFence() = default;
  ~DeviceFence();
  DeviceFence(const DeviceFence&) = delete;
  DeviceFence& operator=(const DeviceFence&) = delete;
  void Record();
  void Wait();

 private:
  void* event_ = nullptr;  // cudaEvent_t, made at the first Record
  bool recorded_ = false;
};

}  // namespace tern
