// The decoder self-attention's keys and values during beam search, kept as a tree of positions:
// each step appends one node per row (its keys and values in every layer) whose parent is the
// node its back-pointer's row appended the step before. A row's history is the path from its
// sentence's first node to its own, kept as a list of node indices. So hypotheses that share a
// prefix share its nodes: a beam that forks copies a list of indices, never keys and values, and
// the beams of one sentence, attended one after the other, read their common prefix from cache
// instead of each from its own copy. A row that joins late (top-up batching) starts a new tree at
// its own position 0, with no masked positions of the rows around it.
//
// Nodes no row's history reaches any more are dropped when the buffers fill: the live ones move
// down (in order, so each list stays valid after renumbering) and the buffers double only when
// live nodes fill more than half of them. Memory is kept across batches; a batch that needed less
// than a quarter of it gives the surplus back at the next Clear, when it holds over shrink_bytes.
// After the first batches nothing here allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tern::inference {

class KvCache {
 public:
  KvCache(int layers, int heads, int64_t dk, int64_t shrink_bytes = kShrinkBytes);

  // Starts a batch: no row has a history. `rows` sizes the first allocation.
  void Clear(int64_t rows);
  static constexpr int64_t kShrinkBytes = 64 << 20;
  // Maps this step's rows onto histories. Row r continues row parents[r] of the previous step, or
  // starts empty when fresh[r]; parents of fresh rows are ignored. Each row gets a new node for
  // this step's position.
  void Reorder(const std::vector<int32_t>& parents, const std::vector<uint8_t>& fresh);
  int64_t rows() const { return rows_; }
  // Positions held for `row` before this step's (its position in its sentence).
  int64_t length(int64_t row) const { return length_[row] - 1; }

  // For every row: stores k, v (rows, heads * dk) of `layer` in the row's node for this step,
  // then attends its query q (rows, heads * dk) over its positions 0..length with
  // softmax(q k / sqrt(dk)), writing the merged heads into out (rows, heads * dk).
  void AppendAndAttend(int layer, const float* k, const float* v, const float* q, float* out);
  // After the last layer of a step (kept for the callers' step structure; the lists already hold
  // this step's node).
  void Advance() {}

  // Values moved between nodes since construction (compaction; for tests and benchmarks).
  int64_t copied_floats() const { return copied_; }
  // Nodes the buffers hold room for.
  int64_t capacity() const { return capacity_; }

 private:
  float* Keys(int layer, int64_t node) { return keys_[layer].get() + node * d_; }
  float* Values(int layer, int64_t node) { return values_[layer].get() + node * d_; }
  // Makes room for `extra` more nodes: drops unreachable nodes, doubling the buffers when the
  // live ones would fill more than half of them.
  void MakeRoom(int64_t extra, const std::vector<int32_t>& parents,
                const std::vector<uint8_t>& fresh);
  // Renumbers the nodes the next step's rows reach into [0, live) in order, moving their keys
  // and values down and rewriting the previous step's lists.
  void Compact(const std::vector<int32_t>& parents, const std::vector<uint8_t>& fresh);
  void Resize(int64_t capacity);

  const int layers_, heads_;
  const int64_t dk_, d_;
  const int64_t shrink_bytes_;
  int64_t capacity_ = 0, nodes_ = 0;  // nodes allocated and in use
  int64_t peak_ = 0;                  // the most nodes in use since Clear
  // Per layer (capacity, heads * dk); left uninitialized (a node is written before it is read).
  std::vector<std::unique_ptr<float[]>> keys_, values_;
  // The rows' histories: row r's node list at lists_[r * stride_], length_[r] entries (this
  // step's node included), and the previous step's in prev_lists_ / prev_length_.
  int64_t rows_ = 0, prev_rows_ = 0, stride_ = 0, prev_stride_ = 0;
  std::vector<int32_t> lists_, prev_lists_;
  std::vector<int64_t> length_, prev_length_;
  std::vector<int32_t> renumber_;  // per node: its index after compaction, or -1
  std::vector<uint8_t> reached_;   // per previous row: some row continues it
  std::vector<float> scores_;
  int64_t copied_ = 0;
};

}  // namespace tern::inference
