// The emulated GPU (tensor/emulated_gpu.h) keeps what makes GPU code paths fail on a GPU: device
// memory the host cannot address, kernels that take only device tensors, and a count of every
// wait for the device. These run in the emulated_gpu.* registration (TERN_EMULATE_GPU=1).
#include "tensor/emulated_gpu.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/error.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tests/tensor/random_tensor.h"

namespace tern {
namespace {

#define SKIP_UNLESS_EMULATED() \
  if (!GpuEmulated()) GTEST_SKIP() << "TERN_EMULATE_GPU=1 not set"

Tensor OnGpu(const Tensor& t) {
  Tensor out = Tensor::Empty(t.shape(), t.dtype(), Device::kCuda);
  Copy(t, out);
  return out;
}

std::vector<float> Back(const Tensor& t) {
  Tensor out = Tensor::Empty(t.shape(), t.dtype(), Device::kCpu);
  Copy(t, out);
  return out.ToVector();
}

TEST(EmulatedGpuTest, StandsInForOneGpuWithoutNccl) {
  SKIP_UNLESS_EMULATED();
  EXPECT_TRUE(CudaAvailable());
  EXPECT_EQ(CudaDeviceCount(), 1);
  EXPECT_EQ(CudaKernelStream(), nullptr);
  SelectCudaDevice(0);
  EXPECT_NE(CudaBusId(0).find("emulated"), std::string::npos);
  EXPECT_EQ(AllocatorFor(Device::kCuda)->device(), Device::kCuda);
}

TEST(EmulatedGpuTest, KernelsGiveTheCpusResults) {
  SKIP_UNLESS_EMULATED();
  Tensor a = testing::RandomTensor({7, 5}, 1), b = testing::RandomTensor({5, 3}, 2);
  Tensor c = Tensor::Zeros({7, 3});
  Gemm(a, false, b, false, c);
  Tensor gc = Tensor::Zeros({7, 3}, DType::kFloat32, Device::kCuda);
  Gemm(OnGpu(a), false, OnGpu(b), false, gc);
  EXPECT_EQ(Back(gc), c.ToVector());
}

TEST(EmulatedGpuTest, AFullGpuIsOneClearErrorAndFreedMemoryCountsAgain) {
  SKIP_UNLESS_EMULATED();
  emulated_gpu::SetMemoryLimit(size_t{1} << 20);
  struct Unlimit {
    ~Unlimit() { emulated_gpu::SetMemoryLimit(0); }
  } unlimit;
  Tensor half = Tensor::Empty({128 << 10}, DType::kFloat32, Device::kCuda);  // 0.5 MiB
  try {
    Tensor::Empty({160 << 10}, DType::kFloat32, Device::kCuda);  // 0.625 MiB more
    FAIL() << "allocated past the limit";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "GPU out of memory: 0.7 MiB more asked with 0.5 MiB held by Tern; lower the "
                 "batch (data.batch_tokens for tern-train, --max-batch-tokens for tern-translate) "
                 "or the model's size");
  }
  half = Tensor();  // given back at the free, before the queue has run
  Tensor again = Tensor::Empty({160 << 10}, DType::kFloat32, Device::kCuda);
  EXPECT_EQ(again.numel(), 160 << 10);
}

TEST(EmulatedGpuDeathTest, TheHostCannotReadDeviceMemory) {
  SKIP_UNLESS_EMULATED();
  Tensor t = Tensor::Zeros({4}, DType::kFloat32, Device::kCuda);
  // As on a GPU: a device pointer dereferenced on the host is a crash, not a quiet read.
  EXPECT_DEATH(
      {
        volatile float x = t.f32()[0];
        (void)x;
      },
      "");
}

TEST(EmulatedGpuTest, AKernelGivenAHostTensorNamesItself) {
  SKIP_UNLESS_EMULATED();
  Tensor gpu = Tensor::Zeros({2, 3}, DType::kFloat32, Device::kCuda);
  Tensor host = Tensor::Zeros({3});
  try {
    emulated_gpu::Backend().kernels()->add_bias(gpu, host);
    FAIL() << "a host bias was taken by a GPU kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add_bias: given a host tensor (3)"), std::string::npos)
        << e.what();
  }
}

TEST(EmulatedGpuTest, HostMemoryLabelledCudaIsRefused) {
  SKIP_UNLESS_EMULATED();
  std::vector<float> host(4, 1.f);
  Tensor fake(host.data(), Shape{4}, DType::kFloat32, Device::kCuda);
  EXPECT_THROW(Fill(fake, 0.f), Error);
  EXPECT_THROW(CopyBytes(host.data(), Device::kCpu, host.data(), Device::kCuda, 16), Error);
  // And the other way: device memory handed over as host memory.
  Tensor gpu = Tensor::Zeros({4}, DType::kFloat32, Device::kCuda);
  EXPECT_THROW(CopyBytes(gpu.raw(), Device::kCpu, gpu.raw(), Device::kCuda, 16), Error);
  EXPECT_EQ(host, std::vector<float>(4, 1.f));
}

TEST(EmulatedGpuTest, WaitsAreCountedWhereAGpuWouldWait) {
  SKIP_UNLESS_EMULATED();
  Tensor host = testing::RandomTensor({64}, 3), pinned = Tensor::PinnedZeros({64});
  Tensor gpu = Tensor::Empty({64}, DType::kFloat32, Device::kCuda);
  Tensor other = Tensor::Empty({64}, DType::kFloat32, Device::kCuda);
  Tensor norm = Tensor::Empty({1}, DType::kFloat32, Device::kCuda);
  const int64_t start = DeviceDrains();
  Copy(host, gpu);  // host to device: waits
  EXPECT_EQ(DeviceDrains(), start + 1);
  Copy(gpu, other);  // on the device: does not
  Add(gpu, other, other, 1.f, 1.f);
  SumSquaresTo(other, norm);
  ClipToNorm(other, norm, 1.f);
  CopyToDeviceAsync(gpu.raw(), Device::kCuda, pinned.raw(), pinned.bytes());
  DeviceFence fence;
  fence.Record();
  fence.Wait();  // waits for a point in the queue, not for all of it
  EXPECT_EQ(DeviceDrains(), start + 1);
  EXPECT_GE(SumSquares(other), 0.0);  // the value comes to the host: waits
  EXPECT_EQ(DeviceDrains(), start + 2);
  EXPECT_EQ(Back(gpu), std::vector<float>(64, 0.f));  // device to host: waits
  EXPECT_EQ(DeviceDrains(), start + 3);
}

TEST(EmulatedGpuTest, WorkRunsWhenTheHostWaitsForIt) {
  SKIP_UNLESS_EMULATED();
  Tensor pinned = Tensor::PinnedZeros({4});
  Tensor gpu = Tensor::Zeros({4}, DType::kFloat32, Device::kCuda);
  // Rewritten before the device got to the copy: the device reads the new bytes, as a GPU may.
  std::fill_n(pinned.f32(), 4, 1.f);
  CopyToDeviceAsync(gpu.raw(), Device::kCuda, pinned.raw(), pinned.bytes());
  std::fill_n(pinned.f32(), 4, 2.f);
  EXPECT_EQ(Back(gpu), std::vector<float>(4, 2.f));
  // With a fence waited for before the rewrite, the device has the bytes of the copy's time.
  DeviceFence fence;
  std::fill_n(pinned.f32(), 4, 3.f);
  CopyToDeviceAsync(gpu.raw(), Device::kCuda, pinned.raw(), pinned.bytes());
  fence.Record();
  Scale(gpu, 2.f);  // queued after the fence: the wait does not run it
  fence.Wait();
  std::fill_n(pinned.f32(), 4, 4.f);
  EXPECT_EQ(Back(gpu), std::vector<float>(4, 6.f));
}

// A kernel's output copied on the device, then let go of by the host: the kernel holds the last
// reference, and the copy, queued after it, reads the memory by address. The memory is freed
// after the copy, as a GPU's stream-ordered allocator frees it. When the kernel's end freed it,
// this was a use after free under ASan (CI's emulated_gpu run); without ASan the bytes may survive.
TEST(EmulatedGpuTest, MemoryAKernelHeldLastIsFreedAfterTheCopiesQueuedBehindIt) {
  SKIP_UNLESS_EMULATED();
  Tensor copy = Tensor::Empty({4096}, DType::kFloat32, Device::kCuda);
  {
    Tensor made = Tensor::Zeros({4096}, DType::kFloat32, Device::kCuda);
    Fill(made, 7.f);   // queued: holds `made`
    Copy(made, copy);  // queued: reads `made` by address
  }
  EXPECT_EQ(Back(copy), std::vector<float>(4096, 7.f));
}

TEST(EmulatedGpuTest, AKernelsFailureReachesTheHostWhenItWaits) {
  SKIP_UNLESS_EMULATED();
  Tensor gpu = Tensor::Zeros({2}, DType::kFloat32, Device::kCuda);
  bool ran = false;
  EnqueueOnEmulatedGpu({gpu}, [&ran](const std::vector<Tensor>& t) {
    EXPECT_EQ(t[0].device(), Device::kCpu);
    ran = true;
    Fail("a queued failure");
  });
  EXPECT_FALSE(ran);
  EXPECT_THROW(Back(gpu), Error);
  EXPECT_TRUE(ran);
  EXPECT_EQ(Back(gpu), std::vector<float>(2, 0.f));  // the queue goes on after it
  EXPECT_THROW(EnqueueOnEmulatedGpu({Tensor::Zeros({2})}, [](const std::vector<Tensor>&) {}),
               Error);
}

}  // namespace
}  // namespace tern
