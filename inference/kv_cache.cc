#include "inference/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/thread_pool.h"
#include "inference/attend_row.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::inference {
KvCache::KvCache(int layers, int heads, int64_t dk, int64_t shrink_bytes)
    : layers_(layers),
      heads_(heads),
      dk_(dk),
      shrink_bytes_(shrink_bytes),
      keys_(layers),
      values_(layers) {}

void KvCache::Clear(int64_t rows) {
  const int64_t bytes = 2 * layers_ * slots_ * heads_ * capacity_ * dk_ * sizeof(float);
  if (bytes > shrink_bytes_ && slots_ > 4 * rows) {
    for (int l = 0; l < layers_; ++l) {
      keys_[l].reset();
      values_[l].reset();
    }
    slots_ = capacity_ = 0;
    used_.clear();
    length_.clear();
    Reserve(std::max<int64_t>(2 * rows, 1), 16);
  }
  free_.clear();
  for (int64_t s = slots_ - 1; s >= 0; --s) free_.push_back(static_cast<int32_t>(s));
  std::fill(used_.begin(), used_.end(), 0);
  std::fill(length_.begin(), length_.end(), 0);
  slot_of_row_.clear();
}

void KvCache::Reserve(int64_t slots, int64_t positions) {
  if (slots <= slots_ && positions <= capacity_) return;
  const int64_t new_slots = std::max(slots_, slots);
  const int64_t new_capacity =
      positions <= capacity_ ? capacity_ : std::max<int64_t>(positions, 2 * capacity_);
  const int64_t per_slot = heads_ * new_capacity * dk_;
  for (int l = 0; l < layers_; ++l) {
    for (std::unique_ptr<float[]>* buffer : {&keys_[l], &values_[l]}) {
      std::unique_ptr<float[]> grown(new float[new_slots * per_slot]);
      for (int64_t s = 0; s < slots_; ++s) {
        if (!used_[s]) continue;
        for (int64_t h = 0; h < heads_; ++h) {
          std::memcpy(grown.get() + s * per_slot + h * new_capacity * dk_,
                      buffer->get() + (s * heads_ + h) * capacity_ * dk_,
                      length_[s] * dk_ * sizeof(float));
        }
      }
      buffer->swap(grown);
    }
  }
  for (int64_t s = new_slots - 1; s >= slots_; --s) free_.push_back(static_cast<int32_t>(s));
  used_.resize(new_slots, 0);
  length_.resize(new_slots, 0);
  slots_ = new_slots;
  capacity_ = new_capacity;
}

int32_t KvCache::TakeFreeSlot() {
  if (free_.empty()) Reserve(std::max<int64_t>(8, 2 * slots_), std::max<int64_t>(capacity_, 16));
  const int32_t s = free_.back();
  free_.pop_back();
  used_[s] = 1;
  length_[s] = 0;
  return s;
}

void KvCache::Reorder(const std::vector<int32_t>& parents, const std::vector<uint8_t>& fresh) {
  const int64_t rows = static_cast<int64_t>(parents.size()), prev_rows = this->rows();
  CHECK_EQ(fresh.size(), parents.size());
  // Old slots continued by some row stay; the others are freed before any copy is placed.
  claims_.assign(slots_, 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (fresh[r]) continue;
    CHECK(parents[r] >= 0 && parents[r] < prev_rows) << "KvCache: parent out of range";
    ++claims_[slot_of_row_[parents[r]]];
  }
  for (int64_t s = 0; s < slots_; ++s) {
    if (used_[s] && claims_[s] == 0) {
      used_[s] = 0;
      free_.push_back(static_cast<int32_t>(s));
    }
  }
  next_slot_of_row_.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    if (fresh[r]) {
      next_slot_of_row_[r] = TakeFreeSlot();
      continue;
    }
    const int32_t from = slot_of_row_[parents[r]];
    if (claims_[from] > 0) {  // the first row continuing `from` takes it over
      claims_[from] = -1;
      next_slot_of_row_[r] = from;
      continue;
    }
    const int32_t to = TakeFreeSlot();  // may grow the buffers; offsets stay valid
    const int64_t n = length_[from] * dk_;
    for (int l = 0; l < layers_; ++l) {
      for (int64_t h = 0; h < heads_; ++h) {
        const int64_t at = h * capacity_ * dk_;
        std::memcpy(Keys(l, to) + at, Keys(l, from) + at, n * sizeof(float));
        std::memcpy(Values(l, to) + at, Values(l, from) + at, n * sizeof(float));
      }
    }
    copied_ += 2 * layers_ * heads_ * n;
    length_[to] = length_[from];
    next_slot_of_row_[r] = to;
  }
  slot_of_row_.swap(next_slot_of_row_);
  int64_t longest = 0;
  for (int64_t r = 0; r < rows; ++r) longest = std::max(longest, length_[slot_of_row_[r]]);
  Reserve(slots_, longest + 1);
}

void KvCache::AppendAndAttend(int layer, const float* k, const float* v, const float* q,
                              float* out) {
  const int64_t rows = this->rows(), d = heads_ * dk_;
  const float scale = 1.f / std::sqrt(static_cast<float>(dk_));
  // Rows own distinct slots, so they go in parallel; a chunk of rows [r0, r1) uses the scratch
  // scores at r0 * capacity_ (rows * capacity_ floats in all, kept between steps).
  if (static_cast<int64_t>(scores_.size()) < rows * capacity_) scores_.resize(rows * capacity_);
  ParallelFor(rows, cpu::GrainRows(2 * d * capacity_), [&](int64_t r0, int64_t r1) {
    float* scores = scores_.data() + r0 * capacity_;
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t s = slot_of_row_[r];
      const int64_t len = length_[s];
      for (int64_t h = 0; h < heads_; ++h) {
        float* keys = Keys(layer, s) + h * capacity_ * dk_;
        float* values = Values(layer, s) + h * capacity_ * dk_;
        std::memcpy(keys + len * dk_, k + r * d + h * dk_, dk_ * sizeof(float));
        std::memcpy(values + len * dk_, v + r * d + h * dk_, dk_ * sizeof(float));
        AttendRow(q + r * d + h * dk_, keys, values, /*mask=*/nullptr, len + 1, dk_, scale, scores,
                  out + r * d + h * dk_);
      }
    }
  });
}

void KvCache::Advance() {
  for (int32_t s : slot_of_row_) ++length_[s];
}

}  // namespace tern::inference
