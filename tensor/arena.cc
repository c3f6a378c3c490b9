#include "tensor/arena.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "tensor/ops.h"

namespace tern {

Arena::Arena(Device device, size_t initial_bytes)
    : device_(device), allocator_(AllocatorFor(device)) {
  AddChunk(initial_bytes);
}

Arena::~Arena() {
  for (Chunk& c : chunks_) allocator_->Free(c.data);
}

void Arena::AddChunk(size_t min_bytes) {
  size_t size = std::max(min_bytes, chunks_.empty() ? size_t{0} : chunks_.back().size * 2);
  size = (size + kAlignment - 1) / kAlignment * kAlignment;
  chunks_.push_back({static_cast<char*>(allocator_->Allocate(size)), size, 0});
  ++system_allocations_;
}

size_t Arena::Rounded(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return rounded == 0 ? kAlignment : rounded;
}

void* Arena::AllocBytes(size_t bytes) {
  const size_t rounded = Rounded(bytes);
  if (!released_.empty()) {
    auto it = released_.find(rounded);
    if (it != released_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;
    }
  }
  Chunk* c = &chunks_.back();
  if (c->used + rounded > c->size) {
    AddChunk(rounded);
    c = &chunks_.back();
  }
  void* p = c->data + c->used;
  c->used += rounded;
  used_total_ += rounded;
  high_water_ = std::max(high_water_, used_total_);
  return p;
}

Tensor Arena::Alloc(const Shape& shape, DType dtype) {
  return Tensor(AllocBytes(shape.numel() * SizeOf(dtype)), shape, dtype, device_);
}

Tensor Arena::AllocZeros(const Shape& shape, DType dtype) {
  Tensor t = Alloc(shape, dtype);
  if (device_ == Device::kCpu) {
    std::memset(t.raw(), 0, t.bytes());
  } else if (t.bytes() > 0) {
    // Zero on the device (no host buffer, no copy). Chunks hold whole kAlignment units, so the
    // float view rounded up stays inside this allocation whatever the dtype.
    Tensor words(t.raw(), Shape{static_cast<int64_t>((t.bytes() + 3) / 4)}, DType::kFloat32,
                 device_);
    KernelsFor(device_).fill(words, 0.f);
  }
  return t;
}

void Arena::Release(const Tensor& t) {
  if (!t.defined()) return;
  CHECK(t.device() == device_) << "Release of a tensor from another device";
  released_[Rounded(t.bytes())].push_back(t.raw());
}

void Arena::Reset() {
  for (auto& [size, blocks] : released_) blocks.clear();
  if (chunks_.size() > 1) {  // merge into one chunk big enough for the high-water mark
    size_t total = 0;
    for (Chunk& c : chunks_) {
      total += c.size;
      allocator_->Free(c.data);
    }
    chunks_.clear();
    AddChunk(std::max(total, high_water_));
  }
  chunks_.back().used = 0;
  used_total_ = 0;
}

}  // namespace tern
