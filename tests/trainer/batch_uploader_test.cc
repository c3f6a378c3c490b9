// BatchUploader: a batch's four arrays reach the arena's device as ToTensors puts them, through
// two staging buffers used in turn (regrown when a batch outgrows them), batch after batch, on
// the CPU and, when one is visible, on a GPU; with the source lengths on the host.
#include <gtest/gtest.h>

#include <vector>

#include "data/batch.h"
#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "trainer/training_data.h"

namespace tern::trainer {
namespace {

data::Batch MakeBatch(int sentences, int src_len, int tgt_len, int seed) {
  data::Batch b;
  b.batch_size = sentences;
  b.src_len = src_len;
  b.tgt_len = tgt_len;
  for (int i = 0; i < sentences * src_len; ++i) {
    b.src.push_back(seed + i);
    b.src_mask.push_back(i % 3 == 0 ? 0.f : 1.f);
  }
  for (int i = 0; i < sentences * tgt_len; ++i) {
    b.tgt_in.push_back(2 * seed + i);
    b.tgt_out.push_back(3 * seed + i);
  }
  return b;
}

std::vector<int32_t> Ints(const Tensor& t) {
  std::vector<int32_t> host(t.numel());
  CopyBytes(host.data(), Device::kCpu, t.raw(), t.device(), t.bytes());
  return host;
}

void ExpectUploadsAsToTensors(Device device) {
  Arena arena(device);
  BatchUploader uploader;
  // Growing, shrinking, then past the first buffer's room: both buffers serve and regrow.
  const std::vector<data::Batch> batches = {MakeBatch(2, 5, 4, 10), MakeBatch(3, 7, 6, 20),
                                            MakeBatch(1, 2, 3, 30), MakeBatch(6, 9, 11, 40),
                                            MakeBatch(4, 3, 2, 50)};
  std::vector<models::BatchTensors> uploaded;
  for (const data::Batch& b : batches) uploaded.push_back(uploader.Upload(b, &arena));
  for (size_t k = 0; k < batches.size(); ++k) {  // every earlier batch still intact
    const data::Batch& b = batches[k];
    const models::BatchTensors& t = uploaded[k];
    ASSERT_EQ(t.src.shape(), Shape({b.batch_size, b.src_len}));
    ASSERT_EQ(t.tgt_out.shape(), Shape({b.batch_size, b.tgt_len}));
    EXPECT_EQ(t.src.device(), device);
    EXPECT_EQ(Ints(t.src), b.src) << "batch " << k;
    EXPECT_EQ(Ints(t.tgt_in), b.tgt_in) << "batch " << k;
    EXPECT_EQ(Ints(t.tgt_out), b.tgt_out) << "batch " << k;
    std::vector<float> mask(t.src_mask.numel());
    CopyBytes(mask.data(), Device::kCpu, t.src_mask.raw(), device, t.src_mask.bytes());
    EXPECT_EQ(mask, b.src_mask) << "batch " << k;
  }
}

TEST(BatchUploaderTest, EveryBatchArrivesAsToTensorsPutsItOnTheCpu) {
  ExpectUploadsAsToTensors(Device::kCpu);
}

TEST(BatchUploaderTest, EveryBatchArrivesAsToTensorsPutsItOnAGpu) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  ExpectUploadsAsToTensors(Device::kCuda);
}

TEST(BatchUploaderTest, APaddedBatchBringsItsSourceLengths) {
  // Each row's tokens, on the host, for the whole GRU layers (cuDNN's lengths); a mask that is not
  // a run of ones then zeros brings none (the layers then run the steps).
  data::Batch b = MakeBatch(3, 4, 2, 1);
  b.src_mask = {1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0};
  Arena arena;
  BatchUploader uploader;
  EXPECT_EQ(uploader.Upload(b, &arena).src_lengths, (std::vector<int32_t>{4, 2, 1}));
  EXPECT_EQ(ToTensors(b, &arena).src_lengths, (std::vector<int32_t>{4, 2, 1}));
  b.src_mask[5] = 0.f;
  b.src_mask[6] = 1.f;
  EXPECT_TRUE(ToTensors(b, &arena).src_lengths.empty());
}

}  // namespace
}  // namespace tern::trainer
