// The kernels one device provides, as a table of functions. tensor/ops.cc is the one dispatch
// point: it checks shapes, then calls the table of the tensors' device. Contracts for each entry
// are the ones written in tensor/ops.h.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tern {

class Arena;  // tensor/arena.h

// One optimizer update's scalars (optim/ keeps the step count and computes the bias
// corrections); the formulas are at KernelTable::adam_update and sgd_update.
struct AdamArgs {
  float learning_rate, beta1, beta2, epsilon, grad_scale;
  float decay;             // learning_rate * weight_decay (decoupled)
  float inv_bc1, inv_bc2;  // 1 / (1 - beta^t)
};
struct SgdArgs {
  float learning_rate, momentum, grad_scale;
  float decay;            // learning_rate * weight_decay (decoupled)
  bool nesterov = false;  // with momentum: step = g grad_scale + momentum u (after u's update)
};

// fp16's dynamic loss scaling decided where the gradients are (ops.h LossScaleGate): the floats
// of its gate, on that device.
enum LossGateField : int {
  kGateScale,      // the loss scale the next backward pass multiplies by
  kGateGoodSteps,  // steps without overflow since the scale last changed
  kGateSkipped,    // steps skipped (overflowed)
  kGateApply,      // 1 when the last gradients were finite, else 0
  kGateInvScale,   // 1 / the scale the last gradients were made with
  kLossGateSize
};
struct LossGateArgs {
  float window;  // good steps that double the scale
  float min_scale, max_scale;
};
// An optimizer step gated on the device (ops.h StepGate): the floats of its state there.
enum StepGateField : int {
  kStepApply,    // the step updates (1) or leaves everything as it was (0)
  kStepInvBc1,   // Adam's 1 / (1 - beta1^t), t the updates applied including this one
  kStepInvBc2,   // and 1 / (1 - beta2^t)
  kStepSkipped,  // gated steps that did not update, since the state was made
  kStepGateSize
};

// One direction of a GRU layer in Tern's layout (models/rnn_layers.h): w (in, 2d) and u (d, 2d)
// for the reset and update gates [r | z], wx (in, d) and ux (d, d) for the candidate, b (2d), bx
// (d).
struct GruWeights {
  Tensor w, wx, u, ux, b, bx;
};

// A whole GRU layer over a sequence in one call (KernelTable::gru_layer; tensor/ops.h's
// GruLayerForward states what it computes).
struct GruLayerCall {
  Tensor x;  // (T, B, in): float32, or of type `inputs` (a mixed-precision graph's rounded operand)
  // (T, B) float 1/0 on x's device, each column a run of ones then zeros, or undefined (no
  // padding).
  Tensor mask;
  Tensor lengths;  // (B) int32 on the host: the ones of each column of mask (undefined without one)
  int directions = 1;     // 1: left to right; 2: both, out = [left to right | right to left]
  GruWeights weights[2];  // per direction, on x's device
  DType inputs = DType::kFloat32;  // the products' operands: kFloat32, kBFloat16 or kFloat16
  bool training = true;            // keep what the backward pass reads in `saved`
  Arena* arena = nullptr;          // on x's device: scratch, and `saved`
  Tensor out;                      // (T, B, directions d) float32, written
  Tensor saved;  // set by gru_layer for gru_layer_backward (undefined where it keeps nothing)
};
// The gradients gru_layer_backward makes from dout.
struct GruLayerGrads {
  Tensor dout;  // (T, B, directions d) float32; its padded positions may be overwritten
  Tensor dx;    // (T, B, in) float32, or undefined
  bool dx_accumulate = true;  // false: dx is written (its old contents never read)
  GruWeights dweights[2];     // accumulated into; an undefined member is skipped
};

struct KernelTable {
  // c = alpha * op(a) @ op(b) + beta * c for 2-D a, b, c (rows, cols), all float32. `inputs`
  // kBFloat16 or kFloat16: a and b are rounded to that type for the product (tensor cores on a
  // GPU), which accumulates and writes float32; an operand already of type `inputs`
  // (round_operand's) is taken as it is.
  void (*gemm)(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
               float alpha, float beta, DType inputs);
  // c = op(a) @ op(b) + bias (n) on every row (alpha 1, beta 0), 2-D, `inputs` as for gemm;
  // with `residual` defined (c's shape, not aliasing c) c = residual + (op(a) @ op(b) + bias);
  // with `activation` kRelu or kGelu (never with a residual) c = f(op(a) @ op(b) + bias), as
  // unary computes f. b may be a batch (batch, k|n, n|k) with bias (batch, n) and c (batch, m, n):
  // one a times each b[i] plus bias[i] (no residual or activation then).
  void (*gemm_bias)(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                    const Tensor& bias, const Tensor& c, DType inputs, const Tensor& residual,
                    int activation);
  // The same over a leading batch dim: a (batch, m|k, k|m), b (batch, ...), c (batch, m, n).
  void (*batched_gemm)(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                       const Tensor& c, float alpha, float beta, DType inputs);
  void (*fill)(const Tensor& x, float value);
  void (*copy)(const Tensor& src, const Tensor& dst);
  // out = alpha * a + beta * b (out may alias a or b).
  void (*add)(const Tensor& a, const Tensor& b, const Tensor& out, float alpha, float beta);
  // out = a * b elementwise, out += ... when accumulate.
  void (*mul)(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);
  // x (rows, n) += bias (n), in place.
  void (*add_bias)(const Tensor& x, const Tensor& bias);
  // x (rows, n) /= divisors (rows), row by row, in place.
  void (*divide_rows)(const Tensor& x, const Tensor& divisors);
  // out (n) = beta * out + sum over rows of x (rows, n).
  void (*sum_rows)(const Tensor& x, const Tensor& out, float beta);
  // Unary activations: out = f(x); backward: dx += dy * f'(x) given y = f(x). A backward's
  // `accumulate` false writes dx instead (its old contents never read), here and below.
  void (*unary)(int op, const Tensor& x, const Tensor& out);
  void (*unary_backward)(int op, const Tensor& y, const Tensor& dy, const Tensor& dx,
                         bool accumulate);
  void (*softmax)(const Tensor& x, const Tensor& out, const Tensor& key_mask, bool causal,
                  float scale);
  void (*softmax_backward)(const Tensor& y, const Tensor& dy, const Tensor& dx, float scale,
                           bool accumulate);
  void (*log_softmax)(const Tensor& x, const Tensor& out);
  void (*layer_norm)(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
                     const Tensor& mean, const Tensor& rstd, float eps);
  void (*layer_norm_backward)(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                              const Tensor& dgamma, const Tensor& dbeta, bool accumulate);
  void (*cross_entropy)(const Tensor& logits, const Tensor& targets, float smoothing,
                        int32_t ignore_id, const Tensor& loss, const Tensor& lse);
  void (*cross_entropy_backward)(const Tensor& logits, const Tensor& targets, float smoothing,
                                 int32_t ignore_id, const Tensor& lse, const Tensor& dloss,
                                 const Tensor& dlogits, bool accumulate);
  void (*gather_rows)(const Tensor& table, const Tensor& ids, const Tensor& out, float scale);
  void (*scatter_add_rows)(const Tensor& dout, const Tensor& ids, const Tensor& dtable,
                           float scale);
  void (*permute_0213)(const Tensor& in, const Tensor& out, bool accumulate);
  void (*dropout_mask)(const Tensor& mask, float keep_prob, uint64_t seed);
  // out = base + x * m, m dropout_mask's mask for (keep_prob, seed) made on the fly; base
  // undefined: 0; base may be out itself (a gradient accumulated) and out may alias x.
  void (*dropout)(const Tensor& x, const Tensor& base, const Tensor& out, float keep_prob,
                  uint64_t seed);
  void (*sum_squares)(const Tensor& x, double* out);
  // out (one float32 on x's device) = the sum of x^2, summed as sum_squares sums it; the host
  // does not wait for it.
  void (*sum_squares_to)(const Tensor& x, const Tensor& out);
  // x *= ClipFactor(squared_norm[0], clip_norm) in place (tensor/clip_factor.h), the squared norm
  // read on x's device.
  void (*clip_to_norm)(const Tensor& x, const Tensor& squared_norm, float clip_norm);
  // Adam over flat spans p, g, m, v (n), in place: g' = g grad_scale;
  // m = b1 m + (1 - b1) g'; v = b2 v + (1 - b2) g'^2;
  // p -= lr (m inv_bc1) / (sqrt(v inv_bc2) + eps) + decay p. out (n, host; CPU only) gets the
  // new p in the same pass when not null. gate (kStepGateSize floats on p's device) or
  // undefined: with one, nothing changes when gate[kStepApply] is 0, and the corrections are
  // gate[kStepInvBc1], gate[kStepInvBc2] instead of a's.
  void (*adam_update)(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                      const AdamArgs& a, const Tensor& gate, float* out);
  // SGD: step = g grad_scale, with momentum (u = momentum u + step; step = u, or Nesterov's
  // step + momentum u) when momentum != 0 (u untouched otherwise); p -= lr step + decay p. out and
  // gate as for adam_update.
  void (*sgd_update)(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a,
                     const Tensor& gate, float* out);
  // The loss-scaling rule of optim::LossScaler on the device: gate (kLossGateSize floats)
  // updated from squared_norm[0] (finite or not), as ops.h LossScaleGate says.
  void (*loss_scale_gate)(const Tensor& squared_norm, const Tensor& gate, const LossGateArgs& a);
  // state (kStepGateSize) from apply[0] for an optimizer's step number `calls` (ops.h StepGate).
  void (*step_gate)(const Tensor& apply, const Tensor& state, float beta1, float beta2,
                    double calls);
  // x *= factor[0] in place, factor one float32 on x's device.
  void (*scale_by)(const Tensor& x, const Tensor& factor);
  // out (R, A, T1, C): for each row r, past (R0, A, T0, C) [ids[r], :, skip + t, :] at positions
  // t < T0 - skip (zeros when ids[r] < 0; ids undefined: row r), next (R, A, C) [r] at position
  // T0 - skip when defined, zeros at the rest. past may be undefined (T0 = 0).
  void (*gather_append)(const Tensor& past, const Tensor& ids, int64_t skip, const Tensor& next,
                        const Tensor& out);
  // Attention of few queries, each query row in one pass (a decoder step's): out (B, Tq, H, dk)
  // [b, i, h] = sum_t softmax_t(scale q[b, h, i] . k[s, h, t]) v[s, h, t] over the keys t with
  // key_mask[s, t] != 0 (and t <= i when causal), s = kv_rows[b] (int32 (B); undefined: b).
  // q (B, H, Tq, dk); k, v (S, H, Tk, dk); key_mask (S, Tk) or undefined. A query with no key
  // left gets zeros. A GPU takes dk <= kAttendMaxHeadWidth (tensor/ops.h).
  void (*attend)(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                 const Tensor& kv_rows, bool causal, float scale, const Tensor& out);
  // out (x's shape, kBFloat16 or kFloat16) = x (float32) rounded to out's type, to nearest even
  // as tensor/low_precision.h rounds.
  void (*round_operand)(const Tensor& x, const Tensor& out);
  // round_operand(x, out) and sum_rows(x, sums, 1) in one pass, the bits of each; null where the
  // device has no such pass (the two run one after the other).
  void (*round_operand_sum_rows)(const Tensor& x, const Tensor& out, const Tensor& sums);
  // x = min(max(x, lo), hi), in place.
  void (*clamp)(const Tensor& x, float lo, float hi);
  // The GRU update (models/rnn_layers.h) of rows of width d: with i_rz, i_h the row's input
  // projections (in_rz (rows|1, 2d), in_h (rows|1, d); one row: the same for every row),
  //   r, z = sigmoid(i_rz + su_rz);  h = tanh(i_h + r * su_h);  out = h + z (s - h)
  // and with row_mask (rows) defined, out = s + m (out - s) where m != 1. su_rz (rows, 2d),
  // su_h, s, out (rows, d).
  void (*gru_cell)(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz, const Tensor& su_h,
                   const Tensor& s, const Tensor& row_mask, const Tensor& out);
  // Its backward from dout (rows, d), r, z, h recomputed: d_rz (rows, 2d) and d_h (rows, d), the
  // gradients of the gates' and the candidate's pre-activations (i_rz + su_rz, i_h + r su_h),
  // are written; d_su_h and ds (rows, d) are accumulated into when defined.
  void (*gru_cell_backward)(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz,
                            const Tensor& su_h, const Tensor& s, const Tensor& row_mask,
                            const Tensor& dout, const Tensor& d_rz, const Tensor& d_h,
                            const Tensor& d_su_h, const Tensor& ds);
  // The MLP attention's scores: scores (rows, S) [r, t] = sum_j tanh(mapped[r / beam, t, j] +
  // q[r, j]) u[j], q (rows, c), mapped (B, S, c), u (c), beam = rows / B.
  void (*additive_attention_scores)(const Tensor& q, const Tensor& mapped, const Tensor& u,
                                    const Tensor& scores);
  // Its backward (beam 1: rows == B), e = tanh(mapped[r, t] + q[r]) recomputed, g[r, t, j] =
  // dscores[r, t] u[j] (1 - e^2): dmapped += g; dq[r] += sum_t g; du_rows (rows, c) = sum_t
  // dscores[r, t] e (per row, written, for a fixed-order sum). Undefined outputs are skipped.
  void (*additive_attention_scores_backward)(const Tensor& q, const Tensor& mapped, const Tensor& u,
                                             const Tensor& dscores, const Tensor& dq,
                                             const Tensor& dmapped, const Tensor& du_rows);
  // A whole GRU layer and its backward (tensor/ops.h GruLayerForward, GruLayerBackward): cuDNN's
  // RNN on a GPU (null in a build without cuDNN), on the CPU and the emulated GPU the reference
  // of tensor/cpu/gru_layer.cc, which graph/ uses only when told to (GruLayerMode::kReference).
  void (*gru_layer)(GruLayerCall& call);
  void (*gru_layer_backward)(const GruLayerCall& call, const GruLayerGrads& grads);
};

// Unary ops for KernelTable::unary.
// kSwish: x sigmoid(x) (SiLU), Marian's and OPUS-MT's feed-forward activation.
enum UnaryOp : int { kRelu = 0, kTanh = 1, kSigmoid = 2, kGelu = 3, kSwish = 4 };
// gemm_bias's activation when it has none.
constexpr int kNoActivation = -1;

}  // namespace tern
