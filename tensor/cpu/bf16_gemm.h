// Products of bf16 operands with float32 accumulation on CPUs with AVX512-BF16 (vdpbf16ps: 32
// bf16 products a cycle into 16 float sums, twice the float32 FMA's rate): mixed-precision
// training's products (training.precision bf16), which a CPU without it emulates (rounded
// operands through the BLAS, gemm.cc).
//
// Both operands are packed per call, as bf16 pairs of consecutive k in 32-bit cells: A's rows as
// (m, k/2) cells, B in panels of 16 columns, (k/2, 16) cells each; a float32 operand is rounded
// to bf16 (nearest even, as RoundOperand) while packed. The kernel broadcasts an A cell into a
// panel row, as the integer GEMM does (int_gemm.h). vdpbf16ps adds a cell's high product, then
// its low one, to the sum, each rounded to nearest even, bf16 and float denormals flushed to
// zero: Bf16GemmReference computes exactly that, and the kernel matches it bit for bit.
//
// Where the CPU has AMX-BF16 (Xeon since Sapphire Rapids), whose vdpbf16ps runs at the float32
// FMA's rate, tdpbf16ps takes the same cells a tile at a time. Its sums round otherwise than any
// order of separately rounded adds (they agree with the definition to float32 rounding, not bit
// for bit), so a run's bits on such a CPU differ from its bits on one without AMX; TERN_AMX=0 makes
// it use the AVX512-BF16 kernel.
#pragma once

#include <cstdint>

namespace tern::cpu {

// An operand: bf16 bits (uint16_t) or float32 values, row-major with row stride ld; op(x) is x
// or, when transposed, its transpose.
struct Bf16Operand {
  const void* data;
  bool bf16;  // else float32, rounded to bf16 while packed
  int64_t ld;
  bool transposed;
};

// x moved on by `elements` of its type (a batch's next entry).
inline Bf16Operand Advance(Bf16Operand x, int64_t elements) {
  x.data = x.bf16 ? static_cast<const void*>(static_cast<const uint16_t*>(x.data) + elements)
                  : static_cast<const void*>(static_cast<const float*>(x.data) + elements);
  return x;
}

// Whether Bf16Gemm has a kernel here: AVX512-BF16, and TERN_ISA not naming a lower ISA.
bool HasBf16GemmKernel();

enum class Bf16Kernel { kAvx512Bf16, kAmx };
// "AVX512-BF16" or "AMX-BF16", as logs and metrics name the kernel.
const char* Bf16KernelName(Bf16Kernel kernel);
// Whether the AMX kernel can run: HasBf16GemmKernel(), AMX-BF16 on the CPU and Linux granting the
// process its tile state.
bool HasAmxBf16Kernel();
// The kernel Bf16Gemm uses: AMX where HasAmxBf16Kernel() and TERN_AMX is not "0", else
// AVX512-BF16. REQUIRES: HasBf16GemmKernel().
Bf16Kernel ActiveBf16Kernel();

// c (m, n), row stride ldc: alpha * op(a) (m, k) @ op(b) (k, n) + beta * c, then + bias (n) on
// every row where bias is not null (the same bits as AddBias after the product, without its
// pass over c); with beta 0 c is only written. Splits large products over the thread pool
// unless `serial` (a caller's own split). REQUIRES: HasBf16GemmKernel().
void Bf16Gemm(const Bf16Operand& a, const Bf16Operand& b, int64_t m, int64_t n, int64_t k,
              float alpha, float beta, float* c, int64_t ldc, bool serial = false,
              const float* bias = nullptr);
// The same with a chosen kernel. REQUIRES: HasAmxBf16Kernel() for kAmx.
void Bf16GemmWith(Bf16Kernel kernel, const Bf16Operand& a, const Bf16Operand& b, int64_t m,
                  int64_t n, int64_t k, float alpha, float beta, float* c, int64_t ldc,
                  bool serial = false, const float* bias = nullptr);
// `count` products of Bf16Gemm's, serially on the calling thread: entry i's operands start
// stride_a and stride_b elements (bf16 or float32, as each operand is) after entry i - 1's and
// its c stride_c floats after. The bits of `count` calls of Bf16Gemm; the AMX kernel configures
// its tiles once for the batch (a self-attention's products are many and small).
void Bf16GemmBatch(const Bf16Operand& a, int64_t stride_a, const Bf16Operand& b, int64_t stride_b,
                   int64_t count, int64_t m, int64_t n, int64_t k, float alpha, float beta,
                   float* c, int64_t stride_c, int64_t ldc);
// The scalar definition of the kernel's bits.
void Bf16GemmReference(const Bf16Operand& a, const Bf16Operand& b, int64_t m, int64_t n, int64_t k,
                       float alpha, float beta, float* c, int64_t ldc, const float* bias = nullptr);

}  // namespace tern::cpu
