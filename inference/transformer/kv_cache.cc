#include "inference/transformer/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/cpu/attend_row.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::inference {

KvCache::KvCache(int layers, int heads, int64_t dk, int64_t shrink_bytes)
    : layers_(layers),
      heads_(heads),
      dk_(dk),
      d_(heads * dk),
      shrink_bytes_(shrink_bytes),
      keys_(layers),
      values_(layers) {}

void KvCache::Clear(int64_t rows) {
  const int64_t bytes = 2 * layers_ * capacity_ * d_ * static_cast<int64_t>(sizeof(float));
  nodes_ = 0;
  const int64_t first = std::max<int64_t>(64, 16 * rows);  // room for the first 16 steps
  if (capacity_ == 0 || (bytes > shrink_bytes_ && 4 * peak_ < capacity_)) {
    Resize(std::max(2 * peak_, first));
  }
  peak_ = 0;
  rows_ = prev_rows_ = 0;
}

void KvCache::Resize(int64_t capacity) {
  capacity = std::max<int64_t>(capacity, 1);
  for (int l = 0; l < layers_; ++l) {
    for (std::unique_ptr<float[]>* buffer : {&keys_[l], &values_[l]}) {
      std::unique_ptr<float[]> resized(new float[capacity * d_]);
      if (nodes_ > 0) std::memcpy(resized.get(), buffer->get(), nodes_ * d_ * sizeof(float));
      buffer->swap(resized);
    }
  }
  capacity_ = capacity;
}

void KvCache::Compact(const std::vector<int32_t>& parents, const std::vector<uint8_t>& fresh) {
  renumber_.assign(nodes_, -1);
  std::vector<uint8_t>& reached = reached_;
  reached.assign(prev_rows_, 0);
  for (size_t r = 0; r < parents.size(); ++r) {
    if (fresh[r] || reached[parents[r]]) continue;
    reached[parents[r]] = 1;
    const int32_t* list = prev_lists_.data() + parents[r] * prev_stride_;
    for (int64_t i = 0; i < prev_length_[parents[r]]; ++i) renumber_[list[i]] = 0;
  }
  int32_t live = 0;
  for (int64_t n = 0; n < nodes_; ++n) {
    if (renumber_[n] < 0) continue;
    if (n != live) {  // live < n: the move goes down, onto a node already moved or dropped
      for (int l = 0; l < layers_; ++l) {
        std::memcpy(Keys(l, live), Keys(l, n), d_ * sizeof(float));
        std::memcpy(Values(l, live), Values(l, n), d_ * sizeof(float));
      }
      copied_ += 2 * layers_ * d_;
    }
    renumber_[n] = live++;
  }
  for (int64_t p = 0; p < prev_rows_; ++p) {
    if (!reached[p]) continue;  // no row continues it: its list is never read again
    int32_t* list = prev_lists_.data() + p * prev_stride_;
    for (int64_t i = 0; i < prev_length_[p]; ++i) list[i] = renumber_[list[i]];
  }
  nodes_ = live;
}

void KvCache::MakeRoom(int64_t extra, const std::vector<int32_t>& parents,
                       const std::vector<uint8_t>& fresh) {
  if (nodes_ + extra <= capacity_) return;
  Compact(parents, fresh);
  if (2 * (nodes_ + extra) > capacity_) Resize(std::max(2 * capacity_, 2 * (nodes_ + extra)));
}

void KvCache::Reorder(const std::vector<int32_t>& parents, const std::vector<uint8_t>& fresh) {
  const int64_t rows = static_cast<int64_t>(parents.size());
  CHECK_EQ(fresh.size(), parents.size());
  int64_t longest = 1;
  for (int64_t r = 0; r < rows; ++r) {
    if (fresh[r]) continue;
    CHECK(parents[r] >= 0 && parents[r] < rows_) << "KvCache: parent out of range";
    longest = std::max(longest, length_[parents[r]] + 1);
  }
  // This step's lists become the previous step's; the new ones may need a longer stride.
  lists_.swap(prev_lists_);
  length_.swap(prev_length_);
  prev_rows_ = rows_;
  prev_stride_ = stride_;
  if (longest > stride_) stride_ = std::max<int64_t>({longest, 2 * stride_, 16});
  MakeRoom(rows, parents, fresh);
  lists_.resize(rows * stride_);
  length_.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* list = lists_.data() + r * stride_;
    int64_t n = 0;
    if (!fresh[r]) {
      n = prev_length_[parents[r]];
      std::memcpy(list, prev_lists_.data() + parents[r] * prev_stride_, n * sizeof(int32_t));
    }
    list[n] = static_cast<int32_t>(nodes_ + r);
    length_[r] = n + 1;
  }
  nodes_ += rows;
  peak_ = std::max(peak_, nodes_);
  rows_ = rows;
}

void KvCache::AppendAndAttend(int layer, const float* k, const float* v, const float* q,
                              float* out) {
  const int64_t rows = rows_, first = nodes_ - rows;
  std::memcpy(Keys(layer, first), k, rows * d_ * sizeof(float));
  std::memcpy(Values(layer, first), v, rows * d_ * sizeof(float));
  const float scale = 1.f / std::sqrt(static_cast<float>(dk_));
  // Rows only read shared nodes, so they go in parallel; a chunk of rows [r0, r1) uses the
  // scratch scores at r0 * stride_ (rows * stride_ floats in all, kept between steps). A
  // sentence's rows are adjacent, so its beams read their common prefix one after the other.
  if (static_cast<int64_t>(scores_.size()) < rows * stride_) scores_.resize(rows * stride_);
  const float* keys = Keys(layer, 0);
  const float* values = Values(layer, 0);
  ParallelFor(rows, cpu::GrainRows(2 * d_ * stride_), [&](int64_t r0, int64_t r1) {
    float* scores = scores_.data() + r0 * stride_;
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t* list = lists_.data() + r * stride_;
      for (int64_t h = 0; h < heads_; ++h) {
        cpu::AttendRowGathered(q + r * d_ + h * dk_, keys + h * dk_, values + h * dk_, list, d_,
                               length_[r], dk_, scale, scores, out + r * d_ + h * dk_);
      }
    }
  });
}

}  // namespace tern::inference
