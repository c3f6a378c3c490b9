// The output layer of beam search (Hoang et al., "Fast Neural Machine Translation
// Implementation"): decoder states are projected onto the whole vocabulary or onto a subset of
// it (a lexical shortlist per batch, or the active tokens of vocabulary clusters per step), and the
// fused pass adds the bias, keeps the k best columns of a row and sums its softmax denominator
// with running-max rescaling (online softmax) in one sweep over the logits, so the log-softmax of
// the whole row is never written. At beam 1 only the argmax is needed, so the pass can skip the
// exponentials altogether.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "inference/layers/decoder_model.h"
#include "inference/layers/layers.h"
#include "inference/layers/linear.h"
#include "tensor/arena.h"
#include "tensor/cpu/int_gemm.h"
#include "tensor/tensor.h"

namespace tern::inference {

// One kept column of a row: its biased logit and its column index.
struct ColumnScore {
  float logit;
  int32_t column;
};

// The top-k pass over a row of logits (n) plus bias (n; null for none): writes the k largest
// producible columns into top (best first; fewer when the row has fewer) and returns
// log(sum exp(logit + bias)) over all n columns, or 0 when normalize is false (then no
// exponential is computed). Columns excluded[0..1] (-1 for none) are never kept but still count
// in the sum, as in LogSoftmax. Vector passes (tensor/cpu/row_scan.h) add the bias and find the
// maximum, and, once k columns are kept, skip to the next column above the worst of them; the
// sum takes a last pass over the biased row: LogSoftmax's own (cpu::SumExpShifted), so the
// normalizer has the unfused path's bits.
float FusedRowTopK(const float* logits, const float* bias, int64_t n, const int32_t excluded[2],
                   int k, bool normalize, std::vector<ColumnScore>* top);

// Not thread-safe; one per BeamSearch. The model it reads may be shared.
class OutputLayer {
 public:
  explicit OutputLayer(const DecoderModel& model);
  OutputLayer(const OutputLayer&) = delete;
  OutputLayer& operator=(const OutputLayer&) = delete;

  // Restricts the output to the tokens `ids` (any order, duplicates allowed) plus pad and bos
  // (columns that count in the softmax but are never kept) until the next Restrict or
  // Unrestrict: gathers their embedding rows and biases.
  void Restrict(const std::vector<int32_t>& ids);
  void Unrestrict();  // the whole vocabulary

  // Restricts by groups of rows instead (a lexical shortlist per sentence): rows
  // [g * rows_per_group, (g + 1) * rows_per_group) get the tokens ids[g] (plus pad and bos), so a
  // sentence's output vocabulary does not depend on the rest of its batch. Until the next
  // Restrict, RestrictGroups or Unrestrict. KeepGroups keeps groups keep[0], keep[1], .. (in that
  // order: the sentences still running) and AddGroups appends groups (sentences joining), without
  // gathering the kept groups again on the CPU. On a GPU the groups' tables are one block,
  // gathered there again by the first Logits after a change (the tokens and biases go up, no
  // embedding row leaves the GPU).
  void RestrictGroups(const std::vector<std::vector<int32_t>>& ids, int rows_per_group);
  void KeepGroups(const std::vector<int32_t>& keep);
  void AddGroups(const std::vector<std::vector<int32_t>>& ids);

  bool restricted() const { return restricted_ || grouped_; }
  bool grouped() const { return grouped_; }
  // Columns of the logits (the widest group's when grouped; a group's rows are padded with -inf).
  int64_t columns() const;
  int32_t token(int64_t column) const {
    return restricted_ ? ids_[column] : static_cast<int32_t>(column);
  }
  // The bias of each column (columns), on the host (a CPU model), and as a tensor on the model's
  // device (not when grouped).
  const float* bias() const { return bias_tensor().f32(); }
  const Tensor& bias_tensor() const { return restricted_ ? bias_ : model_.output_bias(); }
  // The columns of pad and bos, which are never outputs.
  const int32_t* excluded_columns() const { return excluded_; }
  // The same for one row of the logits, grouped or not: its own columns (the rest is padding),
  // the token of a column (pad for padding), its bias and its excluded columns.
  int64_t row_columns(int64_t row) const;
  int32_t row_token(int64_t row, int64_t column) const {
    if (!grouped_) return token(column);
    const Group& g = GroupOf(row);
    return column < static_cast<int64_t>(g.ids.size()) ? g.ids[column] : kPadId;
  }
  const float* row_bias(int64_t row) const;
  const int32_t* row_excluded_columns(int64_t row) const;
  // Mean columns per row of the last Logits (for reports).
  double mean_row_columns(int64_t rows) const;

  // x (rows, e), the output of DecoderModel::OutputInput -> logits (rows, columns()) from arena;
  // with_bias false leaves the bias to FusedRowTopK. Multiplies in integers when the model has an
  // integer output layer (DecoderModel::integer_output), its restricted columns gathered from the
  // packing, so a restricted logit has the bits of the same column unrestricted; a float layer
  // packed for cpu::FloatGemm (DecoderModel::packed_output) packs its restrictions likewise.
  // Grouped rows always take the integer form then: the autotuner times only the whole and the
  // union products. Grouped on a GPU: with_bias must be true, the rows come as whole groups, and a
  // group's padding columns are kGroupPadding rather than -inf (a softmax or fused pass over them
  // stays finite).
  Tensor Logits(const Tensor& x, bool with_bias, Arena& arena);

  // The logit of a grouped row's padding columns on a GPU: exp() of it is 0 beside any real logit.
  static constexpr float kGroupPadding = -1e30f;

 private:
  const DecoderModel& model_;
  const int64_t vocab_;
  bool restricted_ = false;
  std::vector<int32_t> ids_;    // (columns) token of each column, increasing
  std::vector<uint8_t> marks_;  // (V) scratch for Restrict
  Arena table_arena_;           // holds emb_ and bias_
  StepUploader ids_upload_;     // ids_ to the device: clustering restricts at every step
  Tensor emb_;                  // (columns, d) rows of the output embedding, when read
  Tensor bias_;                 // (columns)
  // The integer form of emb_ (when the model has one): gathered columns, emb_ as the float form
  // for a tuner, and that tuner, shared by every restriction.
  std::unique_ptr<cpu::PackedIntMatrix> packed_;
  // emb_ packed for cpu::FloatGemm when the model's float output layer is (packed_output()),
  // so that a restricted logit has the bits of the same column unrestricted.
  cpu::PackedFloatMatrix packed_float_;
  LinearWeights restricted_integer_;
  std::shared_ptr<ProductTuner> restricted_tuner_;
  int32_t excluded_[2] = {-1, -1};

  // Grouped restriction (RestrictGroups): one restricted table per group of rows.
  struct Group {
    std::vector<int32_t> ids;  // token of each column, increasing, with pad and bos
    std::vector<float> emb;    // (columns, d) rows of the output embedding (a CPU model)
    std::vector<float> bias;   // (columns)
    std::unique_ptr<cpu::PackedIntMatrix> packed;  // the integer form, when the model has one
    // Else the float form for cpu::FloatGemm when the model has one (emb then stays empty).
    cpu::PackedFloatMatrix packed_float;
    int32_t excluded[2] = {-1, -1};
  };
  // The columns of a restriction to `ids`: the tokens, increasing, with pad and bos (whose columns
  // go to excluded).
  void Columns(const std::vector<int32_t>& ids, std::vector<int32_t>* columns, int32_t excluded[2]);
  void FillGroup(const std::vector<int32_t>& ids, Group* g);
  const Group& GroupOf(int64_t row) const { return *groups_[row / rows_per_group_]; }
  Tensor GroupedLogits(const Tensor& x2, bool with_bias, Arena& arena) const;
  // On a GPU: every group's rows of the output embedding, (groups, width, d), and a block of the
  // logits' initial values, (groups * rows_per_group, width): each row its group's biases, then
  // kGroupPadding. Rebuilt from groups_ when stale.
  void GatherGroupsOnDevice();
  Tensor DeviceGroupedLogits(const Tensor& x2, Arena& arena);
  bool grouped_ = false;
  int rows_per_group_ = 1;
  std::vector<std::unique_ptr<Group>> groups_;
  std::vector<std::unique_ptr<Group>> spare_groups_;  // dropped groups, reused by AddGroups
  bool device_groups_stale_ = true;
  Arena group_arena_;  // holds group_emb_ and group_init_
  StepUploader group_ids_upload_, group_init_upload_;
  Tensor group_emb_, group_init_;
  std::vector<float> host_bias_;  // the model's output bias, brought down once for the groups
};

}  // namespace tern::inference
