// The seam between tensor/ and its CUDA backend. tensor/cuda/backend.cc defines these in CUDA
// builds; tensor/cuda_backend_none.cc defines them (as "not available") otherwise. Only tensor/
// includes this header.
#pragma once

#include <cstddef>
#include <string>

#include "tensor/allocator.h"
#include "tensor/kernel_table.h"

namespace tern::cuda {

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
// CUDA events as opaque pointers: made, recorded on the current stream, waited for, destroyed.
void* EventCreate();
void EventRecord(void* event);
void EventWait(void* event);
void EventDestroy(void* event);
// nullptr when the build has no CUDA backend.
const KernelTable* Kernels();

}  // namespace tern::cuda
