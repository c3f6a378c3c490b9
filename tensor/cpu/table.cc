#include "tensor/cpu/cpu_kernels.h"

namespace tern::cpu {

const KernelTable& Kernels() {
  static const KernelTable table = {
      &Gemm,
      &BatchedGemm,
      &Fill,
      &Copy,
      &Add,
      &Mul,
      &AddBias,
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
      &AdamUpdate,
      &SgdUpdate,
      &GatherAppend,
  };
  return table;
}

}  // namespace tern::cpu
