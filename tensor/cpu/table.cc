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
      &Gemm,
      &GemmBias,
      &BatchedGemm,
      &Fill,
      &Copy,
      &Add,
      &Mul,
      &AddBias,
      &DivideRows,
      &SumRows,
      &Unary,
      &UnaryBackward,
      &Softmax,
      &SoftmaxBackward,
      &LogSoftmax,
      &LayerNorm,
      &LayerNormBackward,
      &CrossEntropy,
      &CrossEntropyBackward,
      &GatherRows,
      &ScatterAddRows,
      &Permute0213,
      &DropoutMask,
      &SumSquares,
      &SumSquaresTo,
      &ClipToNorm,
      &AdamUpdate,
      &SgdUpdate,
      &GatherAppend,
      &RoundOperand,
      &Clamp,
      &GruCell,
      &GruCellBackward,
      &AdditiveAttentionScores,
      &AdditiveAttentionScoresBackward,
  };
  return table;
}

}  // namespace tern::cpu
