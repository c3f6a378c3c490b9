// The emulated GPU: Device::kCuda in a process with TERN_EMULATE_GPU=1, for testing the GPU code
// paths where no GPU is (CI). Its GpuBackend stands in for the CUDA backend's
// (tensor/cuda_backend.h) when Enabled(). Only tensor/ includes this header; the rest of the
// tree sees GpuEmulated() and EnqueueOnEmulatedGpu() in allocator.h.
//
// What it keeps of a real GPU, so that a test passing on it says something about one:
// - Device memory is host memory whose addresses carry tag bits that make them non-canonical
//   (x86-64) or kernel-half (AArch64) addresses: host code that reads or writes a device tensor's
//   data crashes, as it would on a GPU. Kernels and copies take the tags off.
// - Kernels are the CPU's (tensor/cpu), given host views of their tensors; a kernel handed a host
//   tensor, or a "device" tensor not made by this allocator, fails naming the kernel.
// - Every wait a GPU would make the host do (Synchronize, a copy to or from the host, SumSquares)
//   is counted, so DeviceDrains() tests hold on it as on a GPU.
// - Work on the device is queued and runs only when the host waits for it (and as far as it
//   waits), on the waiting thread: a host buffer rewritten before an asynchronous copy from it
//   has run, a fence not waited for, or a kernel's failure show as they would on a GPU.
// What it does not keep: the GPU's own kernels (their numbers are the CPU's), several streams,
// and NCCL (there is none).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/cuda_backend.h"

namespace tern::emulated_gpu {

// TERN_EMULATE_GPU=1 in the environment (read once).
bool Enabled();

// The most device memory held at once before an allocation fails as a full GPU's does (0: no
// limit, the default). TERN_EMULATE_GPU_MEMORY_MIB sets it at start.
void SetMemoryLimit(size_t bytes);

// The emulated GPU's side of the seam: one GPU per process, whose bus id names the process (so
// that ranks on one host do not share it); no page-locked allocator and no stream to hand out.
const GpuBackend& Backend();

// A CPU tensor over the host memory behind an emulated device tensor (undefined stays undefined);
// fails naming `user` otherwise. REQUIRES: t is undefined or on kCuda, made by the backend's
// device allocator.
Tensor HostView(const Tensor& t, const char* user);
// Queues op(host views of `tensors`), keeping the tensors alive until it has run.
void Enqueue(const std::vector<Tensor>& tensors, std::function<void(const std::vector<Tensor>&)> op,
             const char* user);

}  // namespace tern::emulated_gpu
