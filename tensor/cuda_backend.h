// The seam between tensor/ and its CUDA backend. tensor/cuda/backend.cc defines these in CUDA
// builds; tensor/cuda_backend_none.cc defines them (as "not available") otherwise. Only tensor/
// includes this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tensor/allocator.h"
#include "tensor/kernel_table.h"

namespace tern {

// A GPU backend's side of the seam, as a table: the CUDA one (cuda::Backend()) or the emulated
// one (tensor/emulated_gpu.h). tensor/allocator.cc picks one at start (ActiveGpuBackend) and
// calls nothing else; the entries' contracts are the cuda:: functions' below.
struct GpuBackend {
  Allocator* (*device_allocator)();
  Allocator* (*pinned_allocator)();
  bool (*device_available)();
  int (*device_count)();
  void (*set_device)(int ordinal);
  std::string (*bus_id)(int ordinal);
  void* (*kernel_stream)();
  int64_t (*synchronize_count)();
  void (*copy)(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
  void (*copy_to_device_async)(void* dst, const void* src, size_t bytes);
  void (*zero_async)(void* dst, size_t bytes);
  void* (*event_create)();
  void (*event_record)(void* event);
  void (*event_wait)(void* event);
  void (*event_destroy)(void* event);
  const KernelTable* (*kernels)();
};

// The emulated GPU's table under TERN_EMULATE_GPU=1, else cuda::Backend() (tensor/allocator.cc).
const GpuBackend& ActiveGpuBackend();

// Every GPU backend's out-of-memory error: what was asked, what Tern holds, and what to lower.
[[noreturn]] void FailOutOfDeviceMemory(size_t requested, size_t held);

}  // namespace tern

namespace tern::cuda {

// This build's CUDA backend as a table (every entry "not available" without one).
const GpuBackend& Backend();

// nullptr when the build has no CUDA backend.
Allocator* DeviceAllocator();
// Page-locked host memory (cudaHostAlloc); nullptr without a backend. Only where a GPU is
// visible.
Allocator* PinnedAllocator();
bool DeviceAvailable();
// GPUs visible to this process (0 without a backend or a driver).
int DeviceCount();
// Binds this process to GPU `ordinal`; call before any other CUDA work.
void SetDevice(int ordinal);
// The PCI bus id of GPU `ordinal` ("0000:3b:00.0"): the same GPU seen by two processes.
std::string BusId(int ordinal);
// Waits for the work queued on the current stream (and checks the kernels' error slot).
void Synchronize();
// The current stream (a cudaStream_t); nullptr without a backend.
void* KernelStream();
// Synchronize calls since the process started.
int64_t SynchronizeCount();
void Copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// A host-to-device copy queued on the current stream, not waited for (src page-locked).
void CopyToDeviceAsync(void* dst, const void* src, size_t bytes);
// Zeroes device bytes on the current stream, not waited for (cudaMemsetAsync).
void ZeroAsync(void* dst, size_t bytes);
// CUDA events as opaque pointers: made, recorded on the current stream, waited for, destroyed.
void* EventCreate();
void EventRecord(void* event);
void EventWait(void* event);
void EventDestroy(void* event);
// nullptr when the build has no CUDA backend.
const KernelTable* Kernels();

}  // namespace tern::cuda
