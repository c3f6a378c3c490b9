// The CPU KernelTable. Designated initializers keep each entry matched to its field by name.
#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {
namespace {

#ifdef TERN_MULTIVERSION_TARGET
__attribute__((target("default"))) const char* CloneName() { return "default"; }
__attribute__((target(TERN_MULTIVERSION_TARGET))) const char* CloneName() { return "x86-64-v3"; }
#else
const char* CloneName() { return "none"; }
#endif

}  // namespace

const char* MultiversionClone() { return CloneName(); }

const KernelTable& Kernels() {
  static const KernelTable table = {
      .gemm = &Gemm,
      .gemm_bias = &GemmBias,
      .batched_gemm = &BatchedGemm,
      .fill = &Fill,
      .copy = &Copy,
      .add = &Add,
      .mul = &Mul,
      .add_bias = &AddBias,
      .divide_rows = &DivideRows,
      .sum_rows = &SumRows,
      .unary = &Unary,
      .unary_backward = &UnaryBackward,
      .softmax = &Softmax,
      .softmax_backward = &SoftmaxBackward,
      .log_softmax = &LogSoftmax,
      .layer_norm = &LayerNorm,
      .layer_norm_backward = &LayerNormBackward,
      .cross_entropy = &CrossEntropy,
      .cross_entropy_backward = &CrossEntropyBackward,
      .gather_rows = &GatherRows,
      .scatter_add_rows = &ScatterAddRows,
      .permute_0213 = &Permute0213,
      .dropout_mask = &DropoutMask,
      .dropout = &Dropout,
      .sum_squares = &SumSquares,
      .sum_squares_to = &SumSquaresTo,
      .clip_to_norm = &ClipToNorm,
      .adam_update = &AdamUpdate,
      .sgd_update = &SgdUpdate,
      .loss_scale_gate = &LossScaleGate,
      .step_gate = &StepGate,
      .scale_by = &ScaleBy,
      .gather_append = &GatherAppend,
      .attend = &Attend,
      .round_operand = &RoundOperand,
      .round_operand_sum_rows = &RoundOperandSumRows,
      .clamp = &Clamp,
      .gru_cell = &GruCell,
      .gru_cell_backward = &GruCellBackward,
      .additive_attention_scores = &AdditiveAttentionScores,
      .additive_attention_scores_backward = &AdditiveAttentionScoresBackward,
      .gru_layer = &GruLayer,
      .gru_layer_backward = &GruLayerBackward,
  };
  return table;
}

}  // namespace tern::cpu
