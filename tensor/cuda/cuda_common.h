// What every file of the CUDA backend shares: error checking for runtime, cuBLAS and kernel
// launches (a failure names the call and file:line), the current stream and cuBLAS handle, the
// launch geometry helpers, and the slot where kernels report bad indices. Other CUDA code
// (inference/search/cuda/, comm/'s NCCL communicator) includes it too, so that its work goes to the
// same stream as the tensor kernels and its errors read the same way; device-neutral code never
// does.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace tern::cuda {

// Throws tern::Error "CUDA error at file:line: call: message".
[[noreturn]] void FailCuda(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void FailCublas(cublasStatus_t status, const char* call, const char* file, int line);

#define TERN_CUDA_CHECK(call)                                               \
  do {                                                                      \
    cudaError_t tern_cuda_status_ = (call);                                 \
    if (tern_cuda_status_ != cudaSuccess)                                   \
      ::tern::cuda::FailCuda(tern_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)

#define TERN_CUBLAS_CHECK(call)                                                 \
  do {                                                                          \
    cublasStatus_t tern_cublas_status_ = (call);                                \
    if (tern_cublas_status_ != CUBLAS_STATUS_SUCCESS)                           \
      ::tern::cuda::FailCublas(tern_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: a bad configuration or an earlier asynchronous fault shows here.
#define TERN_CUDA_LAUNCH_CHECK(kernel_name) \
  ::tern::cuda::CheckLaunch(kernel_name, __FILE__, __LINE__)
void CheckLaunch(const char* kernel_name, const char* file, int line);

// The stream this thread's work goes to: one process-wide non-blocking stream unless the thread
// set its own with SetCurrentStream (say, a prefetch or communication thread).
cudaStream_t CurrentStream();
void SetCurrentStream(cudaStream_t stream);
// This thread's cuBLAS handle, bound to CurrentStream().
cublasHandle_t CublasHandle();

// Waits for the current stream, then fails if a kernel reported a bad index since the last check.
void Synchronize();

// Kernels that find an index out of range (an id past a table, a target past the vocabulary)
// record it here instead of reading out of bounds; Synchronize() turns it into a CHECK failure.
// Lives in mapped host memory so reading it costs no copy.
struct DeviceErrorReport {
  int code;  // 0 = none, else one of DeviceErrorCode
  int value;
  int limit;
};
enum DeviceErrorCode : int { kNoError = 0, kGatherId = 1, kScatterId = 2, kTargetId = 3 };
DeviceErrorReport* DeviceErrorSlot();  // device pointer

#ifdef __CUDACC__
// for (int64_t i = ...; i < n; ...) over this thread's share of [0, n).
#define TERN_GRID_STRIDE(i, n)                                                           \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__device__ inline void ReportBadIndex(DeviceErrorReport* slot, int code, int value, int limit) {
  if (atomicCAS(&slot->code, 0, code) == 0) {
    slot->value = value;
    slot->limit = limit;
  }
}
#endif

constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n elements (capped; the loop covers the rest).
inline unsigned BlocksFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  return static_cast<unsigned>(blocks);
}
// Rows per chunk for a sum over the rows of a (rows, cols) matrix in blocks of 32 columns: the
// rows are split into chunks (a multiple of 32 rows each) so that about 512 blocks fill the GPU
// (cols 512 alone gave 16 blocks); each chunk's partial sums are then added in chunk order.
inline int64_t ColumnChunkRows(int64_t rows, int64_t cols) {
  const int64_t col_blocks = (cols + 31) / 32;
  int64_t chunks = std::max<int64_t>(1, 512 / col_blocks);
  chunks = std::min(chunks, std::max<int64_t>(1, (rows + 255) / 256));  // >= 256 rows a chunk
  const int64_t per = (rows + chunks - 1) / chunks;
  return std::max<int64_t>(32, (per + 31) / 32 * 32);
}
// Threads for a block that reduces one row of n elements: a power of two in [32, 512].
inline int RowThreads(int64_t n) {
  int t = 32;
  while (t < 512 && t < n) t *= 2;
  return t;
}

}  // namespace tern::cuda
