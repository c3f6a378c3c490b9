// Integer matrix products for the inference runtime (Devlin 2017; Marian's intgemm):
//   C (m, n) = dequant(quant(A) (m, k) @ B (k, n)) + bias (n)
// B is a weight matrix quantized once (a scale per column, or per tensor) and packed into 16-column
// panels;
// A is quantized on the fly, one scale per row (so a sentence's result does not depend on what
// else is in its batch); products accumulate exactly in int32 and are turned back into float with
// 1 / (row scale * weight scale), bias added in the same pass.
//
// int16: B's per-tensor range is bounded so that k * max|B|^2 < 2^31 (about 15.5 bits less
// log2(k) / 2: 11.5 bits at k = 256, 10 at k = 2048), and each A row's scale so that
// sum_k |A_k| * max|B| < 2^31 (and |A| <= 32767): 32-bit accumulation cannot overflow at any
// width k, and rows that are not all peaks keep several more bits than B.
// int8: both in [-127, 127]; exact in int32 for k < 2^17.
//
// Kernels for SSE2, AVX2, AVX-512BW and AVX-512 VNNI, each in its own file compiled with that ISA's
// flags (int_gemm_<isa>.cc), chosen at run time from the CPU (TERN_ISA=sse2|avx2|avx512|avx512bw|
// avx512vnni overrides, e.g. to test every kernel a machine has). IntGemmReference is the exact
// scalar definition every kernel must match bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tern::cpu {

enum class IntType { kInt16, kInt8 };
enum class IntGemmIsa { kSse2, kAvx2, kAvx512bw, kAvx512vnni };

const char* IntTypeName(IntType type);
const char* IntGemmIsaName(IntGemmIsa isa);
// The ISAs this build has kernels for and this CPU runs, lowest first.
std::vector<IntGemmIsa> SupportedIntGemmIsas();
// The ISA IntGemm uses: TERN_ISA when set (tern::Error if unknown or not supported by the CPU),
// else the best supported one.
IntGemmIsa ActiveIntGemmIsa();
// The ISA a TERN_ISA value names ("avx512": the best AVX-512 kernel); tern::Error when the name
// is unknown or the CPU lacks it.
IntGemmIsa ParseIntGemmIsa(const std::string& name);

// The largest |value| of a quantized weight matrix with `k` rows (what the export and the file
// reader agree on); the per-row bound for activations follows from it.
int32_t WeightQuantRange(IntType type, int64_t k);
// Scale mapping max|w| to WeightQuantRange (1 for an all-zero matrix).
float WeightQuantScale(IntType type, int64_t k, float max_abs);
// q[i] = clamp(round(w[i] * scale)) into int16_t or int8_t `out` (count elements).
void QuantizeWeights(IntType type, const float* w, int64_t count, float scale, void* out);
// Quantizes a weight matrix of `k` rows (count values) with WeightQuantScale of its largest |w|
// into `out`; returns the scale.
float QuantizeWeightMatrix(IntType type, const float* w, int64_t k, int64_t count, void* out);
// The same with one scale per column: w (k, n), or (n, k) when transposed, into `out` in w's
// layout, column j with WeightQuantScale of its own largest |w| (scales[j]). A column whose values
// are all small keeps as many bits as the widest, so far less rounding error than one scale for
// the whole matrix (on the bible teacher: 317 of 320 int16 test translations equal to float32's,
// 316 with a per-tensor scale).
void QuantizeWeightColumns(IntType type, const float* w, int64_t k, int64_t n, bool transposed,
                           void* out, float* scales);

// B (k, n) quantized and packed for the kernels. Layout: panels of 16 columns, each panel
// (groups, 16, g) with g = 2 (int16) or 4 (int8) consecutive k per 32-bit cell; k and n padded
// with zeros. Immutable after construction; safe to share between threads.
class PackedIntMatrix {
 public:
  // q holds int16_t or int8_t values (per `type`): (k, n) row-major, or (n, k) when `transposed`
  // (the output layer packs the (V, d) embedding this way). |q| must be within
  // WeightQuantRange(type, k).
  // column_scales (n) or null: value[kk][j] = q / (scale * column_scales[j]).
  PackedIntMatrix(IntType type, const void* q, int64_t k, int64_t n, float scale, bool transposed,
                  const float* column_scales = nullptr);
  // Quantizes float w ((k, n), or (n, k) when transposed) column by column
  // (QuantizeWeightColumns) and packs it.
  static std::unique_ptr<PackedIntMatrix> FromFloat(IntType type, const float* w, int64_t k,
                                                    int64_t n, bool transposed);
  // The columns `columns` of this matrix (any order, repeats allowed), in that order, into *out:
  // what a restricted output layer (a shortlist, or the clusters' tokens) multiplies by, copied
  // from the packing without re-quantizing, so its products give the bits of the full matrix'
  // columns. *out's storage is reused when it is large enough (it is regathered every batch or
  // step; the matrix it held is overwritten, so it must not be shared).
  void GatherColumns(const std::vector<int32_t>& columns,
                     std::unique_ptr<PackedIntMatrix>* out) const;
  ~PackedIntMatrix();
  PackedIntMatrix(const PackedIntMatrix&) = delete;
  PackedIntMatrix& operator=(const PackedIntMatrix&) = delete;

  IntType type() const { return type_; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  float scale() const { return scale_; }
  // (n) 1 / column scale, or null when the matrix has only the per-tensor scale.
  const float* column_unquant() const {
    return column_unquant_.empty() ? nullptr : column_unquant_.data();
  }
  int64_t groups() const { return groups_; }     // padded k / g
  int64_t panels() const { return panels_; }     // padded n / 16
  const uint8_t* data() const { return data_; }  // panels * groups * 64 bytes, 64-aligned
  // int8 only: -128 * column sums (panels * 16), the correction for kernels that shift A to
  // unsigned (VNNI's u8 x s8 product).
  const int32_t* shift_offsets() const { return shift_offsets_.data(); }
  // The quantized value B[kk][nn] read back from the packing (tests, the reference).
  int32_t At(int64_t kk, int64_t nn) const;

 private:
  // Zeroed storage for (k, n); the public constructor and GatherColumns fill it.
  PackedIntMatrix(IntType type, int64_t k, int64_t n, float scale);

  IntType type_;
  int64_t k_, n_, groups_, panels_;
  float scale_;
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;  // bytes at data_
  std::vector<int32_t> shift_offsets_;
  std::vector<float> column_unquant_;
};

// c (m, n), row stride ldc = c's row length >= n: c = dequant(quant(a) @ b) + bias. a (m, k) float
// row-major (stride k); bias (n) or null. Splits large products over the thread pool.
// skip_zero_groups: for an a with many zeros (the input of a ReLU layer's second product), rows
// go in tiles of 4 that skip the k-groups (2 int16 or 4 int8 values) zero in all 4 rows, when
// that skips over a quarter of the work; the same bits either way (the products skipped are 0).
void IntGemm(const float* a, int64_t m, const PackedIntMatrix& b, const float* bias, float* c,
             int64_t ldc, bool skip_zero_groups = false);
// The same with a given kernel (REQUIRES: isa in SupportedIntGemmIsas()).
void IntGemmWithIsa(IntGemmIsa isa, const float* a, int64_t m, const PackedIntMatrix& b,
                    const float* bias, float* c, int64_t ldc, bool skip_zero_groups = false);
// The scalar definition: bit-identical results to every kernel.
void IntGemmReference(const float* a, int64_t m, const PackedIntMatrix& b, const float* bias,
                      float* c, int64_t ldc);

}  // namespace tern::cpu
