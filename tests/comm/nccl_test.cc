// NCCL collectives on one GPU (one rank): the result must equal the input (a world of one), and
// uneven ranges take the grouped path. Skipped without a GPU.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "comm/in_process.h"
#include "comm/nccl_communicator.h"
#include "tensor/ops.h"

namespace tern::comm {
namespace {

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(NcclTest, SingleRankCollectives) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  InProcessWorld world(1);
  auto nccl = MakeNcclCommunicator(world.rank(0), 0);
  std::vector<float> host(1000);
  for (int i = 0; i < 1000; ++i) host[i] = static_cast<float>(i);
  float* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 2000 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, host.data(), 1000 * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  Tensor a(device, Shape{1000}, DType::kFloat32, Device::kCuda);
  Tensor b(device + 1000, Shape{1000}, DType::kFloat32, Device::kCuda);
  nccl->AllReduceSum(a);
  nccl->ReduceScatterSum(a, {1000}, b);
  nccl->AllGather(b, {1000}, a);
  std::vector<float> back(1000);
  ASSERT_EQ(cudaMemcpy(back.data(), device, 1000 * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(back, host);
  cudaFree(device);
}

// Regression: the collectives read buffers the tensor kernels are still writing on their own
// stream (a step's gradients). NCCL's stream does not order after it, so the communicator must
// wait first. A large fill just queued, then an out-of-place reduce-scatter, must see the fill.
TEST(NcclTest, SeesWhatTheTensorKernelsJustWrote) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device";
  InProcessWorld world(1);
  auto nccl = MakeNcclCommunicator(world.rank(0), 0);
  const int64_t n = int64_t{1} << 26;  // 256 MiB: the fill is still running when NCCL starts
  Tensor in = Tensor::Zeros(Shape{n}, DType::kFloat32, Device::kCuda);
  Tensor out = Tensor::Zeros(Shape{n}, DType::kFloat32, Device::kCuda);
  for (int round = 1; round <= 3; ++round) {
    Fill(in, static_cast<float>(round));
    nccl->ReduceScatterSum(in, {n}, out);
    std::vector<float> back = out.ToVector();
    int64_t wrong = 0;
    for (float v : back) wrong += v != static_cast<float>(round);
    EXPECT_EQ(wrong, 0) << "round " << round;
  }
}

}  // namespace
}  // namespace tern::comm
