// The CUDA side of tensor/cuda_backend.h: the device allocator (a caching pool over cudaMalloc),
// device detection, copies between host and device, the current stream and cuBLAS handle, and
// turning CUDA errors into messages that name the call and file:line.
//
// The pool assumes one GPU per process (the trainer binds each rank to one device, from its local
// rank, before the first allocation: SelectCudaDevice). Freed blocks are kept, keyed by size, and
// handed out again (best fit) for later requests, so from the second training step on no step calls
// cudaMalloc.
#include <glog/logging.h>

#include <atomic>
#include <iterator>
#include <map>
#include <mutex>
#include <unordered_map>

#include "common/error.h"
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda_backend.h"

namespace tern::cuda {

void FailCuda(cudaError_t status, const char* call, const char* file, int line) {
  Fail("CUDA error at ", file, ":", line, ": ", call, ": ", cudaGetErrorName(status), " (",
       cudaGetErrorString(status), ")");
}

void FailCublas(cublasStatus_t status, const char* call, const char* file, int line) {
  Fail("cuBLAS error at ", file, ":", line, ": ", call, ": ", cublasGetStatusName(status), " (",
       cublasGetStatusString(status), ")");
}

void CheckLaunch(const char* kernel_name, const char* file, int line) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) FailCuda(status, kernel_name, file, line);
}

namespace {

thread_local cudaStream_t thread_stream = nullptr;
thread_local cublasHandle_t thread_cublas = nullptr;

cudaStream_t ProcessStream() {
  static cudaStream_t stream = [] {
    cudaStream_t s;
    TERN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }();
  return stream;
}

struct ErrorSlot {
  DeviceErrorReport* host = nullptr;
  DeviceErrorReport* device = nullptr;
};

ErrorSlot& TheErrorSlot() {
  static ErrorSlot slot = [] {
    ErrorSlot s;
    TERN_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&s.host), sizeof(DeviceErrorReport),
                                  cudaHostAllocMapped));
    *s.host = {kNoError, 0, 0};
    TERN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&s.device), s.host, 0));
    return s;
  }();
  return slot;
}

const char* DescribeErrorCode(int code) {
  switch (code) {
    case kGatherId:
      return "GatherRows: id outside the table";
    case kScatterId:
      return "ScatterAddRows: id outside the table";
    case kTargetId:
      return "CrossEntropy: target id outside the vocabulary";
  }
  return "unknown kernel error";
}

// Size classes: multiples of 512 bytes up to 1 MiB, multiples of 2 MiB above (whole-page
// blocks for large tensors). Every class is a multiple of 64, so alignment is kept.
size_t SizeClass(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = 2 << 20;
  if (bytes == 0) bytes = 1;
  if (bytes <= (1 << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

class CachingDeviceAllocator : public Allocator {
 public:
  void* Allocate(size_t bytes) override {
    if (!DeviceAvailable()) {
      Fail("a CUDA tensor was requested but no CUDA GPU is visible (check the driver, ",
           "CUDA_VISIBLE_DEVICES, or set training.device to \"cpu\")");
    }
    const size_t size = SizeClass(bytes);
    cudaStream_t stream = CurrentStream();
    std::lock_guard<std::mutex> lock(mutex_);
    // Best fit among cached blocks, wasting at most half of the block; among blocks of that
    // size the most recently freed (still warm in L2, and predictable for tests).
    auto it = free_.lower_bound(size);
    if (it != free_.end() && it->first <= 2 * size) {
      it = std::prev(free_.upper_bound(it->first));
      const size_t block_size = it->first;
      Block block = it->second;
      free_.erase(it);
      // The block was freed by work queued on another stream: let that work finish first.
      if (block.stream != stream) TERN_CUDA_CHECK(cudaStreamSynchronize(block.stream));
      cached_bytes_ -= block_size;
      in_use_[block.ptr] = block_size;
      return block.ptr;
    }
    void* ptr = nullptr;
    cudaError_t status = cudaMalloc(&ptr, size);
    if (status == cudaErrorMemoryAllocation) {  // give the cache back and try once more
      cudaGetLastError();
      ReleaseCachedLocked();
      status = cudaMalloc(&ptr, size);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      FailOutOfDeviceMemory(size, device_bytes_ - cached_bytes_);
    }
    if (status != cudaSuccess) FailCuda(status, "cudaMalloc", __FILE__, __LINE__);
    device_bytes_ += size;
    in_use_[ptr] = size;
    return ptr;
  }

  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = in_use_.find(ptr);
    CHECK(it != in_use_.end()) << "freeing a pointer the CUDA allocator did not hand out";
    const size_t size = it->second;
    in_use_.erase(it);
    free_.emplace(size, Block{ptr, CurrentStream()});
    cached_bytes_ += size;
  }

  Device device() const override { return Device::kCuda; }

 private:
  struct Block {
    void* ptr;
    cudaStream_t stream;  // the stream of the thread that freed it
  };

  void ReleaseCachedLocked() {
    TERN_CUDA_CHECK(cudaDeviceSynchronize());
    for (auto& [size, block] : free_) {
      TERN_CUDA_CHECK(cudaFree(block.ptr));
      device_bytes_ -= size;
    }
    free_.clear();
    cached_bytes_ = 0;
  }

  std::mutex mutex_;
  std::multimap<size_t, Block> free_;         // GUARDED_BY(mutex_)
  std::unordered_map<void*, size_t> in_use_;  // GUARDED_BY(mutex_)
  size_t device_bytes_ = 0;  // GUARDED_BY(mutex_): all cudaMalloc'ed, cached blocks included
  size_t cached_bytes_ = 0;  // GUARDED_BY(mutex_)
};

}  // namespace

cudaStream_t CurrentStream() { return thread_stream != nullptr ? thread_stream : ProcessStream(); }

void SetCurrentStream(cudaStream_t stream) { thread_stream = stream; }

cublasHandle_t CublasHandle() {
  if (thread_cublas == nullptr) TERN_CUBLAS_CHECK(cublasCreate(&thread_cublas));
  TERN_CUBLAS_CHECK(cublasSetStream(thread_cublas, CurrentStream()));
  return thread_cublas;
}

DeviceErrorReport* DeviceErrorSlot() { return TheErrorSlot().device; }

std::atomic<int64_t> synchronizations{0};

void* KernelStream() { return CurrentStream(); }

int64_t SynchronizeCount() { return synchronizations.load(std::memory_order_relaxed); }

void Synchronize() {
  synchronizations.fetch_add(1, std::memory_order_relaxed);
  TERN_CUDA_CHECK(cudaStreamSynchronize(CurrentStream()));
  volatile DeviceErrorReport* report = TheErrorSlot().host;
  if (report->code != kNoError) {
    LOG(FATAL) << "a CUDA kernel found bad input: " << DescribeErrorCode(report->code) << " (id "
               << report->value << ", limit " << report->limit << ")";
  }
}

// Page-locked host memory: cudaHostAlloc rounds to pages itself, so there is no pool here (the
// host copies of a GPU run are made once).
class PinnedHostAllocator : public Allocator {
 public:
  void* Allocate(size_t bytes) override {
    void* p = nullptr;
    TERN_CUDA_CHECK(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault));
    return p;
  }
  // Errors ignored: at exit the runtime may already be unloading, and a destructor must not throw.
  void Free(void* ptr) override { cudaFreeHost(ptr); }
  Device device() const override { return Device::kCpu; }
};

Allocator* PinnedAllocator() {
  static PinnedHostAllocator* allocator = new PinnedHostAllocator;  // never destroyed, as below
  return allocator;
}

Allocator* DeviceAllocator() {
  // Never destroyed: tensors held by other statics may be freed during exit.
  static CachingDeviceAllocator* allocator = new CachingDeviceAllocator;
  return allocator;
}

bool DeviceAvailable() {
  static const bool available = [] {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
      cudaGetLastError();  // no driver or no GPU: not sticky, but clear it anyway
      return false;
    }
    return count > 0;
  }();
  return available;
}

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void SetDevice(int ordinal) { TERN_CUDA_CHECK(cudaSetDevice(ordinal)); }

std::string BusId(int ordinal) {
  char id[32] = {};
  TERN_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof(id), ordinal));
  return id;
}

void ZeroAsync(void* dst, size_t bytes) {
  if (bytes == 0) return;
  TERN_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, CurrentStream()));
}

void CopyToDeviceAsync(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  TERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, CurrentStream()));
}

void* EventCreate() {
  cudaEvent_t event = nullptr;
  TERN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void EventRecord(void* event) {
  TERN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), CurrentStream()));
}

void EventWait(void* event) {
  TERN_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
}

// Errors ignored: called from destructors, possibly while the runtime unloads at exit.
void EventDestroy(void* event) { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

void Copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (!DeviceAvailable())
    Fail("a copy to or from a CUDA tensor was requested but no GPU is visible");
  cudaMemcpyKind kind = cudaMemcpyDeviceToDevice;
  if (src_device == Device::kCpu) kind = cudaMemcpyHostToDevice;
  if (dst_device == Device::kCpu) kind = cudaMemcpyDeviceToHost;
  TERN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, CurrentStream()));
  // The host side may be a temporary the caller frees on return: finish before returning.
  if (dst_device == Device::kCpu || src_device == Device::kCpu) Synchronize();
}

}  // namespace tern::cuda
