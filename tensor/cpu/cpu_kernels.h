// The CPU kernel table. Kernels are plain loops the compiler vectorizes, cloned per ISA
// (TERN_MULTIVERSION: AVX2+FMA and baseline, chosen at load time), and split over the thread pool
// where the work is large enough to pay for it. Matrix products go to the BLAS.
#pragma once

#include "tensor/kernel_table.h"

// The clone is chosen by the CPU's features (AVX2, FMA, BMI2, ...: x86-64-v3). "arch=haswell"
// was chosen by the CPU's model, so it ran only on Intel's Haswell and every other CPU got the
// baseline clone.
// TERN_MULTIVERSION_V4 adds an AVX-512 (x86-64-v4) clone, and TERN_MULTIVERSION_V4_ONLY has only
// that and the baseline: for loops whose clones give the same bits (integer steps, or a file built
// with -ffp-contract=off). Sanitizer builds (TERN_NO_MULTIVERSION) clone nothing.
#if defined(__x86_64__) && !defined(TERN_NO_MULTIVERSION)
#define TERN_MULTIVERSION_TARGET "arch=x86-64-v3"
#define TERN_MULTIVERSION __attribute__((target_clones(TERN_MULTIVERSION_TARGET, "default")))
#define TERN_MULTIVERSION_V4 \
  __attribute__((target_clones("arch=x86-64-v4", TERN_MULTIVERSION_TARGET, "default")))
#define TERN_MULTIVERSION_V4_ONLY __attribute__((target_clones("arch=x86-64-v4", "default")))
#else
#define TERN_MULTIVERSION
#define TERN_MULTIVERSION_V4
#define TERN_MULTIVERSION_V4_ONLY
#endif

namespace tern::cpu {

// Which clone TERN_MULTIVERSION functions run on this CPU: "x86-64-v3", "default", or "none"
// when the build has no clones. Dispatched by the same rule as theirs (a test checks it).
const char* MultiversionClone();

const KernelTable& Kernels();

// Rows per parallel chunk so that each chunk does about `work_per_chunk` element operations.
inline int64_t GrainRows(int64_t cols, int64_t work_per_chunk = 16384) {
  return cols <= 0 ? 1 : (work_per_chunk + cols - 1) / cols;
}

void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha, float beta, DType inputs);
void GemmBias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
              const Tensor& c, DType inputs, const Tensor& residual, int activation);
void BatchedGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 float alpha, float beta, DType inputs);
void Fill(const Tensor& x, float value);
void Copy(const Tensor& src, const Tensor& dst);
void Add(const Tensor& a, const Tensor& b, const Tensor& out, float alpha, float beta);
void Mul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);
void AddBias(const Tensor& x, const Tensor& bias);
// x (rows, n) = residual + (x + bias) row by row: GemmBias's residual, with the bits of AddBias
// and then Add(residual, x).
void AddBiasResidual(const Tensor& x, const Tensor& bias, const Tensor& residual);
void DivideRows(const Tensor& x, const Tensor& divisors);
void SumRows(const Tensor& x, const Tensor& out, float beta);
void Unary(int op, const Tensor& x, const Tensor& out);
void UnaryBackward(int op, const Tensor& y, const Tensor& dy, const Tensor& dx, bool accumulate);
void Softmax(const Tensor& x, const Tensor& out, const Tensor& key_mask, bool causal, float scale);
void SoftmaxBackward(const Tensor& y, const Tensor& dy, const Tensor& dx, float scale,
                     bool accumulate);
void LogSoftmax(const Tensor& x, const Tensor& out);
void LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
               const Tensor& mean, const Tensor& rstd, float eps);
void LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, const Tensor& dx, const Tensor& dgamma,
                       const Tensor& dbeta, bool accumulate);
void CrossEntropy(const Tensor& logits, const Tensor& targets, float smoothing, int32_t ignore_id,
                  const Tensor& loss, const Tensor& lse);
void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, float smoothing,
                          int32_t ignore_id, const Tensor& lse, const Tensor& dloss,
                          const Tensor& dlogits, bool accumulate);
void GatherRows(const Tensor& table, const Tensor& ids, const Tensor& out, float scale);
void ScatterAddRows(const Tensor& dout, const Tensor& ids, const Tensor& dtable, float scale);
void Permute0213(const Tensor& in, const Tensor& out, bool accumulate);
void GatherAppend(const Tensor& past, const Tensor& ids, int64_t skip, const Tensor& next,
                  const Tensor& out);
// Row by row with AttendRow (attend_row.cc).
void Attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
            const Tensor& kv_rows, bool causal, float scale, const Tensor& out);
void Clamp(const Tensor& x, float lo, float hi);
void GruCell(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz, const Tensor& su_h,
             const Tensor& s, const Tensor& row_mask, const Tensor& out);
void GruCellBackward(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz,
                     const Tensor& su_h, const Tensor& s, const Tensor& row_mask,
                     const Tensor& dout, const Tensor& d_rz, const Tensor& d_h,
                     const Tensor& d_su_h, const Tensor& ds);
void AdditiveAttentionScores(const Tensor& q, const Tensor& mapped, const Tensor& u,
                             const Tensor& scores);
void AdditiveAttentionScoresBackward(const Tensor& q, const Tensor& mapped, const Tensor& u,
                                     const Tensor& dscores, const Tensor& dq, const Tensor& dmapped,
                                     const Tensor& du_rows);
// The host reference of a whole GRU layer (gru_layer.cc): cuDNN's documented function, in double.
void GruLayer(GruLayerCall& call);
void GruLayerBackward(const GruLayerCall& call, const GruLayerGrads& grads);
void RoundOperand(const Tensor& x, const Tensor& out);
void RoundOperandSumRows(const Tensor& x, const Tensor& out, const Tensor& sums);
void DropoutMask(const Tensor& mask, float keep_prob, uint64_t seed);
void Dropout(const Tensor& x, const Tensor& base, const Tensor& out, float keep_prob,
             uint64_t seed);
void SumSquares(const Tensor& x, double* out);
void SumSquaresTo(const Tensor& x, const Tensor& out);
void ClipToNorm(const Tensor& x, const Tensor& squared_norm, float clip_norm);
void AdamUpdate(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamArgs& a, const Tensor& gate, float* out);
void SgdUpdate(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a,
               const Tensor& gate, float* out);
void LossScaleGate(const Tensor& squared_norm, const Tensor& gate, const LossGateArgs& a);
void StepGate(const Tensor& apply, const Tensor& state, float beta1, float beta2, double calls);
void ScaleBy(const Tensor& x, const Tensor& factor);

}  // namespace tern::cpu
