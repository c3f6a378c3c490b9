// StagingRing: values reach the device in order, and a buffer is not written again before the
// device has read it. On the emulated GPU (emulated_gpu.* registration) copies run late, so a
// missing fence shows as a later batch's values in an earlier destination.
#include "tensor/staging.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "tensor/ops.h"

namespace tern {
namespace {

Device TestDevice() { return CudaAvailable() ? Device::kCuda : Device::kCpu; }

std::vector<int32_t> Back(const Tensor& t) {
  Tensor host = Tensor::Empty(t.shape(), DType::kInt32, Device::kCpu);
  Copy(t, host);
  return std::vector<int32_t>(host.i32(), host.i32() + host.numel());
}

TEST(StagingRingTest, EachSendArrivesAsItWasWhenSent) {
  const Device d = TestDevice();
  StagingRing ring(2);
  std::vector<Tensor> sent;
  std::vector<std::vector<int32_t>> expected;
  // Growing sizes: buffers are regrown while earlier copies may still be queued.
  for (int round = 0; round < 6; ++round) {
    const int64_t words = 700 * (round + 1);
    std::vector<int32_t> values(words);
    std::iota(values.begin(), values.end(), 1000 * round);
    int32_t* host = ring.Next(words);
    std::copy(values.begin(), values.end(), host);
    Tensor dst = Tensor::Empty({words}, DType::kInt32, d);
    ring.Send(dst.raw(), d, words);
    // Written over after the send, as the next batch's caller may not: only Next may reuse it.
    sent.push_back(dst);
    expected.push_back(values);
  }
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_EQ(Back(sent[i]), expected[i]) << "send " << i;
}

TEST(StagingRingTest, ABufferIsReusedOnlyAfterTheDeviceReadIt) {
  const Device d = TestDevice();
  StagingRing ring(1);
  Tensor first = Tensor::Empty({4}, DType::kInt32, d),
         second = Tensor::Empty({4}, DType::kInt32, d);
  int32_t* host = ring.Next(4);
  std::fill(host, host + 4, 7);
  ring.Send(first.raw(), d, 4);
  host = ring.Next(4);  // the same buffer: the copy above must have read it first
  std::fill(host, host + 4, 9);
  ring.Send(second.raw(), d, 4);
  EXPECT_EQ(Back(first), std::vector<int32_t>(4, 7));
  EXPECT_EQ(Back(second), std::vector<int32_t>(4, 9));
}

// A ring given back with a copy still queued from it (a search that stopped with an error, a
// decoder dropped): its page-locked buffers are handed out again at once, so it must wait for the
// device to have read them. Here the next ring of the same size gets the same memory.
TEST(StagingRingTest, ARingGivenBackWaitsForItsCopies) {
  const Device d = TestDevice();
  constexpr int64_t kWords = 1024;
  Tensor dst = Tensor::Empty({kWords}, DType::kInt32, d);
  {
    StagingRing ring(1);
    int32_t* host = ring.Next(kWords);
    std::fill(host, host + kWords, 5);
    ring.Send(dst.raw(), d, kWords);
  }
  StagingRing next(1);
  int32_t* host = next.Next(kWords);
  std::fill(host, host + kWords, 6);
  EXPECT_EQ(Back(dst), std::vector<int32_t>(kWords, 5));
}

}  // namespace
}  // namespace tern
