// The decoder self-attention's keys and values during beam search, kept in slots: a slot holds one
// hypothesis' positions 0..length, per layer as (heads, capacity, dk) keys and values. Each step
// maps the new rows onto slots through their back-pointers: the first row continuing a parent
// takes over the parent's slot in place, any further row continuing it gets a copy of that
// history (copy on write), and slots no row continues are freed. So a step appends one position
// per row and copies only the histories the beam duplicates, instead of gathering the whole cache;
// and a row that joins late (top-up batching) starts in an empty slot at its own position 0, with
// no masked positions of the rows around it.
//
// Memory grows by doubling (slots, positions) and is kept across batches up to kShrinkBytes;
// below that, after the first batches nothing here allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tern::inference {

class KvCache {
 public:
  KvCache(int layers, int heads, int64_t dk, int64_t shrink_bytes = kShrinkBytes);

  // Frees every slot for a batch of `rows` rows. Keeps the memory, unless it holds more than
  // shrink_bytes and more than 4 slots per row (a beam's reorders need up to 2): the buffers are
  // then cut to 2 slots per row, so that a batch of many short rows after one of few long rows
  // does not keep (most rows) x (longest row) alive. The margin matters: cutting to `rows` slots
  // after every large batch made the next one regrow (reallocate, copy, fault in) its buffers.
  void Clear(int64_t rows);
  static constexpr int64_t kShrinkBytes = 64 << 20;
  // Maps this step's rows to slots. Row r continues row parents[r] of the previous step, or starts
  // empty when fresh[r]; parents of fresh rows are ignored.
  void Reorder(const std::vector<int32_t>& parents, const std::vector<uint8_t>& fresh);
  int64_t rows() const { return static_cast<int64_t>(slot_of_row_.size()); }
  // Positions held for `row` before this step's (its position in its sentence).
  int64_t length(int64_t row) const { return length_[slot_of_row_[row]]; }

  // For every row: appends k, v (rows, heads * dk) of `layer` at the row's position, then attends
  // its query q (rows, heads * dk) over positions 0..length with softmax(q k / sqrt(dk)), writing
  // the merged heads into out (rows, heads * dk).
  void AppendAndAttend(int layer, const float* k, const float* v, const float* q, float* out);
  // After the last layer of a step: every row's length grows by one.
  void Advance();

  // Values copied between slots since construction (for tests and benchmarks).
  int64_t copied_floats() const { return copied_; }
  int64_t slots() const { return slots_; }

 private:
  float* Keys(int layer, int64_t slot) { return keys_[layer].get() + Offset(slot); }
  float* Values(int layer, int64_t slot) { return values_[layer].get() + Offset(slot); }
  int64_t Offset(int64_t slot) const { return slot * heads_ * capacity_ * dk_; }
  // Makes room for `slots` slots of `positions` positions each, keeping the contents.
  void Reserve(int64_t slots, int64_t positions);
  int32_t TakeFreeSlot();

  const int layers_, heads_;
  const int64_t dk_;
  const int64_t shrink_bytes_;
  int64_t slots_ = 0, capacity_ = 0;  // allocated slots and positions per slot
  // Per layer (slots, heads, capacity, dk); left uninitialized (only positions below a slot's
  // length are ever read), so growing costs no zero fill.
  std::vector<std::unique_ptr<float[]>> keys_, values_;
  std::vector<int64_t> length_;  // per slot
  std::vector<uint8_t> used_;    // per slot
  std::vector<int32_t> free_;    // free slots
  std::vector<int32_t> slot_of_row_, next_slot_of_row_, claims_;
  std::vector<float> scores_;
  int64_t copied_ = 0;
};

}  // namespace tern::inference
