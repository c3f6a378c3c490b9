#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern {
namespace {

TEST(TensorTest, ViewsShareMemory) {
  Tensor t = Tensor::FromVector({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor r = t.Reshape({3, 2});
  EXPECT_EQ(r.raw(), t.raw());
  Tensor s = t.Slice(1, 2);
  EXPECT_EQ(s.shape(), Shape({1, 3}));
  EXPECT_EQ(s.at(0), 4.f);
  s.f32()[0] = 40.f;
  EXPECT_EQ(t.at(3), 40.f);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.cols(), 3);
  EXPECT_EQ(t.dim(-1), 3);
}

// Without a GPU, pinned memory is ordinary host memory; with one, the pinned allocator's (the
// GPU case is in cuda_kernels_test). Either way zeros, writable, on the host.
TEST(TensorTest, PinnedZerosAreHostZeros) {
  Tensor t = Tensor::PinnedZeros({3, 5});
  EXPECT_EQ(t.device(), Device::kCpu);
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t.at(i), 0.f);
  t.f32()[14] = 2.f;
  EXPECT_EQ(t.at(14), 2.f);
  EXPECT_EQ(PinnedHostAllocator()->device(), Device::kCpu);
  if (!CudaAvailable()) {
    EXPECT_EQ(PinnedHostAllocator(), AllocatorFor(Device::kCpu));
  }
}

TEST(ArenaTest, ResetMergesChunksSoTheNextStepDoesNotAllocate) {
  Arena arena(Device::kCpu, 1024);
  for (int i = 0; i < 20; ++i) arena.Alloc({1000});
  EXPECT_GT(arena.chunk_count(), 1);
  arena.Reset();
  EXPECT_EQ(arena.chunk_count(), 1);
  int64_t allocations = arena.system_allocations();
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 20; ++i) {
      Tensor t = arena.Alloc({1000});
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % kAlignment, 0u);
    }
    arena.Reset();
  }
  EXPECT_EQ(arena.system_allocations(), allocations);
}

TEST(ArenaTest, AReleasedBlockServesTheNextAllocOfItsSizeUntilReset) {
  Arena arena(Device::kCpu, 1 << 16);
  Tensor a = arena.Alloc({1000});
  Tensor b = arena.Alloc({1000});
  Fill(a, 3.f);
  const size_t used = arena.used_bytes();
  arena.Release(a);
  Tensor other = arena.Alloc({7});  // another size: from the bump pointer
  EXPECT_NE(other.raw(), a.raw());
  Tensor again = arena.AllocZeros({250, 4});  // the same bytes: a's block, zeroed
  EXPECT_EQ(again.raw(), a.raw());
  EXPECT_EQ(again.ToVector(), std::vector<float>(1000, 0.f));
  Tensor fresh = arena.Alloc({1000});  // nothing released left: bump
  EXPECT_NE(fresh.raw(), a.raw());
  EXPECT_NE(fresh.raw(), b.raw());
  EXPECT_EQ(arena.used_bytes(), used + 64 + 4000 + 32);  // 7 floats and 1000 rounded to 64 bytes
  arena.Release(b);
  arena.Reset();  // forgets released blocks: the next Alloc starts at the bottom again
  Tensor first = arena.Alloc({1000});
  EXPECT_EQ(first.raw(), a.raw());
  Tensor second = arena.Alloc({1000});
  EXPECT_EQ(second.raw(), b.raw());
}

}  // namespace
}  // namespace tern
