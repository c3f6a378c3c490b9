// Float32 products with a weight matrix packed once, for the inference runtime's linear layers:
//   C (m, n) = act(A (m, k) @ B (k, n) + bias (n) + residual (m, n))
// A BLAS packs B again at every call; at a decoder step's few rows that packing costs as much as
// the product (OpenBLAS's sgemm at 64 x 256 x 8000 spent a third of its time copying B). Here B
// is packed at load into 16-column panels, each (k, 16) contiguous, and the kernels broadcast one
// A value into a panel row: the layout of the integer GEMM (int_gemm.h), in float32.
//
// Every output is one fused multiply-add chain over k in order, from 0, then + bias, + residual,
// then the ReLU: the same bits on every kernel (AVX2+FMA, AVX-512; FloatGemmReference is the
// scalar definition) and whatever the number of rows or threads, so a sentence's result does not
// depend on its batch. Kernels: float_gemm_<isa>.cc, each compiled with its ISA's flags and
// chosen at run time like the integer GEMM's (TERN_ISA: sse2 means none, the BLAS then).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/cpu/int_gemm.h"

namespace tern::cpu {

// B (k, n) in panels of 16 columns: panel p holds (k, 16) floats, columns past n zero.
class PackedFloatMatrix {
 public:
  PackedFloatMatrix() = default;
  // w (k, n) row-major, or (n, k) when transposed (the output layer's (V, d) embedding).
  PackedFloatMatrix(const float* w, int64_t k, int64_t n, bool transposed);
  ~PackedFloatMatrix();
  PackedFloatMatrix(const PackedFloatMatrix&) = delete;
  PackedFloatMatrix& operator=(const PackedFloatMatrix&) = delete;

  // Packs the rows `rows[0..n)` of a (V, k) table as the n columns of B, reusing this matrix's
  // storage when it is large enough: a restricted output layer's E^T, regathered every batch.
  void PackRows(const float* table, int64_t k, const int32_t* rows, int64_t n);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return (n_ + kPanel - 1) / kPanel; }
  const float* data() const { return data_; }  // panels * k * 16 floats, 64-byte aligned
  float At(int64_t kk, int64_t nn) const {
    return data_[((nn / kPanel) * k_ + kk) * kPanel + nn % kPanel];
  }

  static constexpr int64_t kPanel = 16;

 private:
  void Reserve(int64_t k, int64_t n);

  int64_t k_ = 0, n_ = 0;
  float* data_ = nullptr;
  size_t capacity_ = 0;  // floats at data_
};

// What is added to the product, and the activation, in the kernels' store.
struct FloatEpilogue {
  const float* bias = nullptr;      // (n) or null
  const float* residual = nullptr;  // (m, ldr) or null
  int64_t ldr = 0;
  bool relu = false;
};

// Whether FloatGemm has a kernel here (AVX2+FMA or AVX-512, and TERN_ISA does not say sse2).
bool HasFloatGemmKernel();

// c (m, ldc): a (m, lda) @ b, then the epilogue. Splits large products over the thread pool.
// REQUIRES: HasFloatGemmKernel().
void FloatGemm(const float* a, int64_t m, int64_t lda, const PackedFloatMatrix& b,
               const FloatEpilogue& epilogue, float* c, int64_t ldc);
// The same with a given kernel: kAvx2 (with FMA) or an AVX-512 one (REQUIRES: the CPU has it).
void FloatGemmWithIsa(IntGemmIsa isa, const float* a, int64_t m, int64_t lda,
                      const PackedFloatMatrix& b, const FloatEpilogue& epilogue, float* c,
                      int64_t ldc);
// The ISAs FloatGemmWithIsa runs on this CPU (kAvx2, kAvx512bw), lowest first.
std::vector<IntGemmIsa> SupportedFloatGemmIsas();
// The scalar definition: every kernel's bits.
void FloatGemmReference(const float* a, int64_t m, int64_t lda, const PackedFloatMatrix& b,
                        const FloatEpilogue& epilogue, float* c, int64_t ldc);

}  // namespace tern::cpu
