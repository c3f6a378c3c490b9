#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include "tensor/arena.h"

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

}  // namespace
}  // namespace tern
