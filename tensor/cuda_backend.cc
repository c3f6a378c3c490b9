// cuda::Backend(): the cuda:: functions of tensor/cuda_backend.h as a table, in every build
// (tensor/cuda/backend.cc defines them with CUDA, tensor/cuda_backend_none.cc without).
#include "tensor/cuda_backend.h"

namespace tern::cuda {

const GpuBackend& Backend() {
  static const GpuBackend backend = {
      .device_allocator = &DeviceAllocator,
      .pinned_allocator = &PinnedAllocator,
      .device_available = &DeviceAvailable,
      .device_count = &DeviceCount,
      .set_device = &SetDevice,
      .bus_id = &BusId,
      .kernel_stream = &KernelStream,
      .synchronize_count = &SynchronizeCount,
      .copy = &Copy,
      .copy_to_device_async = &CopyToDeviceAsync,
      .zero_async = &ZeroAsync,
      .event_create = &EventCreate,
      .event_record = &EventRecord,
      .event_wait = &EventWait,
      .event_destroy = &EventDestroy,
      .kernels = &Kernels,
  };
  return backend;
}

}  // namespace tern::cuda
