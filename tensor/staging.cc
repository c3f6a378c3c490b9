#include "tensor/staging.h"

#include <algorithm>

#include "common/error.h"

namespace tern {

StagingRing::StagingRing(int depth) : buffers_(depth), read_(new DeviceFence[depth]) {
  CHECK_GE(depth, 1);
}

StagingRing::~StagingRing() {
  for (size_t i = 0; i < buffers_.size(); ++i) read_[i].Wait();
}

int32_t* StagingRing::Next(int64_t words) {
  read_[next_].Wait();
  Tensor& buffer = buffers_[next_];
  if (!buffer.defined() || buffer.numel() < words)  // room to grow: few reallocations a run
    buffer = Tensor::PinnedZeros({std::max<int64_t>(words + words / 2, 1024)}, DType::kInt32);
  return buffer.i32();
}

void StagingRing::Send(void* dst, Device device, int64_t words) {
  CHECK_LE(words, buffers_[next_].numel()) << "StagingRing::Send past what Next made room for";
  CopyToDeviceAsync(dst, device, buffers_[next_].raw(), words * sizeof(int32_t));
  read_[next_].Record();
  next_ = (next_ + 1) % static_cast<int>(buffers_.size());
}

}  // namespace tern
