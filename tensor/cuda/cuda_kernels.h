// The CUDA kernel table: launchers for the kernels in elementwise.cu, softmax.cu, norm.cu and
// indexing.cu, and the cuBLAS matrix products in gemm.cc. Each matches the CPU kernel of the same
// name in tensor/cpu/ (same contract, backward accumulates); all run on CurrentStream().
#pragma once

#include "tensor/kernel_table.h"

namespace tern::cuda {

void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha, float beta, DType inputs);
// Through cuBLASLt's bias epilogue where it has an algorithm, else Gemm then AddBias.
void GemmBias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
              const Tensor& c, DType inputs, const Tensor& residual, int activation);
void BatchedGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 float alpha, float beta, DType inputs);
// out (bf16 or fp16, x's size) = x (float32) rounded to nearest even (convert.cu).
void ConvertFloat(const Tensor& x, const Tensor& out);
void Fill(const Tensor& x, float value);
void CopyTensor(const Tensor& src, const Tensor& dst);  // device to device
void Add(const Tensor& a, const Tensor& b, const Tensor& out, float alpha, float beta);
void Mul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);
void AddBias(const Tensor& x, const Tensor& bias);
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
// One block per query row, a running maximum and rescaled sums (attention.cu).
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

// cuDNN's whole GRU layers (cudnn_gru.cc: KernelTable::gru_layer and gru_layer_backward), or null
// in a build without cuDNN (cudnn_none.cc) or where the cuDNN loaded is not version 9.
using GruLayerFn = void (*)(GruLayerCall& call);
using GruLayerBackwardFn = void (*)(const GruLayerCall& call, const GruLayerGrads& grads);
GruLayerFn CudnnGruLayer();
GruLayerBackwardFn CudnnGruLayerBackward();

}  // namespace tern::cuda
