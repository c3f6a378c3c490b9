// A bump allocator for activations: every tensor of a training step or decoder step comes from
// here, and Reset() frees them all at once. After a Reset the arena merges its chunks into one of
// the high-water size, so from the second step on the hot path never calls the general allocator.
// A block given back early with Release serves a later Alloc of the same size before Reset (the
// backward pass gives back each node's gradient once it is consumed).
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/tensor.h"

namespace tern {

class Arena {
 public:
  explicit Arena(Device device = Device::kCpu, size_t initial_bytes = 1 << 20);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  Tensor Alloc(const Shape& shape, DType dtype = DType::kFloat32);
  Tensor AllocZeros(const Shape& shape, DType dtype = DType::kFloat32);
  void* AllocBytes(size_t bytes);

  // Gives t's block back for a later Alloc of the same rounded size. REQUIRES: t is a tensor this
  // arena's Alloc returned (not a view into one) and nothing reads or writes it afterwards; on a
  // GPU, work already queued on the stream may still use it (the stream keeps the order).
  void Release(const Tensor& t);
  // Frees every tensor handed out since the last Reset.
  void Reset();

  Device device() const { return device_; }
  size_t used_bytes() const { return used_total_; }
  size_t high_water_bytes() const { return high_water_; }
  int chunk_count() const { return static_cast<int>(chunks_.size()); }
  // Number of times the arena asked the device allocator for memory (for tests of the hot path).
  int64_t system_allocations() const { return system_allocations_; }

 private:
  struct Chunk {
    char* data;
    size_t size;
    size_t used;
  };
  void AddChunk(size_t min_bytes);
  static size_t Rounded(size_t bytes);

  Device device_;
  Allocator* allocator_;
  std::vector<Chunk> chunks_;
  size_t used_total_ = 0;
  size_t high_water_ = 0;
  int64_t system_allocations_ = 0;
  // Released blocks by rounded size; the vectors keep their capacity across Resets.
  std::unordered_map<size_t, std::vector<void*>> released_;
};

}  // namespace tern
