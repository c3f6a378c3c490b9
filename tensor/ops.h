// Device-neutral tensor kernels. Each function checks its arguments' shapes (a mismatch is a
// programmer error: CHECK with file:line) and dispatches on the device of its tensors to the
// device's KernelTable. All float32 unless said. Backward functions ACCUMULATE into gradients.
#pragma once

#include <cstdint>

#include "tensor/kernel_table.h"
#include "tensor/tensor.h"

namespace tern {

const KernelTable& KernelsFor(Device device);

// c (m, n) = alpha * op(a) @ op(b) + beta * c. a (m, k) or (k, m) when trans_a; likewise b.
// Rank-3 a, b and c multiply batch by batch; a of rank > 2 with 2-D b (no trans_a) is taken as
// one (rows, k) matrix. All float32; `inputs` kBFloat16 or kFloat16 rounds a and b to that type
// for the product (mixed precision: tensor cores on a GPU, the same rounding emulated on the
// CPU), accumulated and written in float32. An operand that RoundOperand already made of type
// `inputs` is used as it is (the same product, without rounding it again).
void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha = 1.f, float beta = 0.f, DType inputs = DType::kFloat32);

// c (m, n) = op(a) @ op(b) + bias (n) on every row: Gemm with alpha 1, beta 0 and the bias added
// in the same pass where the device can (cuBLASLt's bias epilogue on a GPU; the product, then
// AddBias, on the CPU). 2-D products, or rank-3 a times 2-D b as Gemm takes them.
// With `residual` (c's shape, not c itself) c = residual + (op(a) op(b) + bias): a sublayer's
// output and its residual connection in the product's pass on a GPU (cuBLASLt's C operand).
// With `activation` kRelu or kGelu (not with a residual) c = f(op(a) op(b) + bias), Unary's f:
// a feed-forward layer's first product and its activation in one pass on a GPU (cuBLASLt's
// RELU_BIAS and GELU_BIAS epilogues); on the CPU the bits of GemmBias, then Unary.
// A batch of products of one a: b (batch, k, n) (or (batch, n, k) when trans_b), bias (batch, n),
// c (batch, m, n), c[i] = op(a) op(b[i]) + bias[i], in one launch where the device can (cuBLASLt's
// strided batch with a's stride 0): the queries, keys and values of a decoder step's
// self-attention from one input. No residual or activation with a batch.
void GemmBias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
              const Tensor& c, DType inputs = DType::kFloat32, const Tensor& residual = Tensor(),
              int activation = kNoActivation);

// out (x's shape, kBFloat16 or kFloat16, x's device) = x (float32) rounded to out's type: a
// mixed-precision operand made once for every product it enters.
void RoundOperand(const Tensor& x, const Tensor& out);
// RoundOperand(x, out) and SumRows(x, sums, 1) in one pass over x where the device has it (the
// CPU: the output layer's gradient is read once instead of twice), each with its own bits.
void RoundOperandSumRows(const Tensor& x, const Tensor& out, const Tensor& sums);
// Whether products with `inputs` operands run in hardware on `device` (a GPU's tensor cores, a
// CPU's AVX512-BF16 or AMX-BF16 for bf16) rather than as float32 products of rounded operands,
// which cost more than float32's.
bool NativeProductInputs(Device device, DType inputs);
// The CPU's bf16 product kernel by name ("AMX-BF16" or "AVX512-BF16"), for logs; "none" without
// one.
const char* CpuBf16KernelName();

// Floating-point operations done by Gemm since the process started (2·m·n·k per product), for
// model-FLOPs utilization figures.
int64_t GemmFlops();
// Elements rounded to bf16 or fp16 for products since the process started: by Gemm for its
// float32 operands, and by RoundOperand (for tests of mixed precision's cost).
int64_t OperandRoundings();
// Ops of the kernel table run on a GPU (real or emulated) since the process started, and copies
// to, from or within it: each is one launch or a few, so per decoder or training step it is what
// a small batch pays in launch latency.
int64_t DeviceOps();

void Fill(const Tensor& x, float value);
void Copy(const Tensor& src, const Tensor& dst);  // same shape, any devices
// out = alpha * a + beta * b.
void Add(const Tensor& a, const Tensor& b, const Tensor& out, float alpha = 1.f, float beta = 1.f);
// out (+)= a * b.
void Mul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate = false);
// y += alpha * x.
inline void Axpy(float alpha, const Tensor& x, const Tensor& y) { Add(y, x, y, 1.f, alpha); }
void Scale(const Tensor& x, float alpha);                      // in place
void AddBias(const Tensor& x, const Tensor& bias);             // x (rows, n) += bias (n)
void DivideRows(const Tensor& x, const Tensor& divisors);      // x (rows, n) /= divisors (rows)
void SumRows(const Tensor& x, const Tensor& out, float beta);  // out (n) = beta*out + Σrows x

void Unary(UnaryOp op, const Tensor& x, const Tensor& out);
// dx += dy * f'(x), given y = f(x). For kGelu and kSwish pass the input x as `y` (their
// derivatives are not functions of the output).
// The backward ops here take `accumulate`: true adds into dx, a gradient that already holds
// another contribution; false writes dx (its old contents never read), a gradient's first
// contribution, which saves zero-filling it first: on a GPU a launch and two passes over it.
void UnaryBackward(UnaryOp op, const Tensor& y, const Tensor& dy, const Tensor& dx,
                   bool accumulate = true);

// Row softmax of scale * x over the last dim. x (batch, heads, tq, tk) or any (rows, n).
// key_mask (batch, tk), float 1 = keep / 0 = masked, may be undefined; causal masks k > q
// (for 4-D x, q is dim 2). Masked entries get probability 0; a fully masked row is all 0.
void Softmax(const Tensor& x, const Tensor& out, const Tensor& key_mask = Tensor(),
             bool causal = false, float scale = 1.f);
// dx += scale * y * (dy - sum(dy * y)).
void SoftmaxBackward(const Tensor& y, const Tensor& dy, const Tensor& dx, float scale = 1.f,
                     bool accumulate = true);
void LogSoftmax(const Tensor& x, const Tensor& out);

// x (rows, n); gamma, beta (n); mean, rstd (rows) are outputs saved for backward.
void LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
               const Tensor& mean, const Tensor& rstd, float eps);
// dx += the input's gradient (`accumulate` applies to it); dgamma, dbeta += theirs, when defined.
void LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, const Tensor& dx, const Tensor& dgamma,
                       const Tensor& dbeta, bool accumulate = true);

// Label-smoothed cross-entropy. logits (rows, V); targets int32 (rows); rows whose target is
// ignore_id get loss 0 and no gradient. loss (rows) and lse (rows, the log-sum-exp) are outputs.
// loss_i = -(1-s) log p[t_i] - s/V Σ_v log p[v].
void CrossEntropy(const Tensor& logits, const Tensor& targets, float smoothing, int32_t ignore_id,
                  const Tensor& loss, const Tensor& lse);
// dlogits += dloss_i * (softmax_i - (1-s) onehot(t_i) - s/V); an ignored row gets 0.
void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, float smoothing,
                          int32_t ignore_id, const Tensor& lse, const Tensor& dloss,
                          const Tensor& dlogits, bool accumulate = true);

// out (n, d) = scale * table[ids] ; ids int32 (n).  dtable[ids] += scale * dout.
void GatherRows(const Tensor& table, const Tensor& ids, const Tensor& out, float scale = 1.f);
void ScatterAddRows(const Tensor& dout, const Tensor& ids, const Tensor& dtable, float scale = 1.f);

// in (a, b, c, d) -> out (a, c, b, d); its own inverse. accumulate: out += permuted.
void Permute0213(const Tensor& in, const Tensor& out, bool accumulate = false);

// mask = 1/keep_prob with probability keep_prob, else 0; deterministic in seed.
// Gathers and extends per-row histories (a decoder's cached self-attention keys and values):
// out (R, A, T1, C) gets, for each row r, past[ids[r], :, skip + t, :] at positions
// t < T0 - skip (zeros when ids[r] < 0; ids undefined means row r), next[r] (R, A, C) at position
// T0 - skip when next is defined, and zeros at the remaining positions up to T1. past (R0, A, T0,
// C) may be undefined (T0 = 0). All float32 but ids (int32); out must not overlap past or next.
void GatherAppend(const Tensor& past, const Tensor& ids, int64_t skip, const Tensor& next,
                  const Tensor& out);

// Scaled dot-product attention of few queries in one op (KernelTable::attend states it): a
// decoder step's self- and cross-attention without the scores' products and softmax as three
// launches. q (B, H, Tq, dk); k, v (S, H, Tk, dk); key_mask (S, Tk) float 1 keep / 0 masked, or
// undefined; kv_rows int32 (B) on q's device, query sentence b attending to k, v and key_mask's
// sentence kv_rows[b] (undefined: b; then S == B); causal keeps keys t <= i for query i.
// out (B, Tq, H, dk), the heads merged. A query with every key masked gets zeros. On the CPU
// each query row is AttendRow's (tensor/cpu/attend_row.h): a sentence gets the same bits in any
// batch. On a GPU one pass per query with a running maximum and rescaled sums; dk at most
// kAttendMaxHeadWidth there (wider heads: products and Softmax).
constexpr int64_t kAttendMaxHeadWidth = 256;
void Attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
            const Tensor& kv_rows, bool causal, float scale, const Tensor& out);

void DropoutMask(const Tensor& mask, float keep_prob, uint64_t seed);
// out = base + x * DropoutMask's mask for (keep_prob, seed), the mask made on the fly: dropout's
// forward pass (base undefined: 0; or a residual connection's input, the sum in the same pass)
// and its backward (base out itself: a gradient accumulated), with no mask stored, written or
// read; x * m has the bits of Mul by the stored mask. out may alias x or base.
void Dropout(const Tensor& x, const Tensor& out, float keep_prob, uint64_t seed,
             const Tensor& base = Tensor());

// x = min(max(x, lo), hi), in place.
void Clamp(const Tensor& x, float lo, float hi);

// The GRU runtime's kernels (inference/rnn/rnn.h), as KernelTable::gru_cell and
// additive_attention_scores state them: one GRU update of rows s (rows, d) from the input
// projections in_rz (rows or 1, 2d), in_h (rows or 1, d) and the state products su_rz (rows, 2d),
// su_h (rows, d); row_mask (rows) may be undefined. out (rows, d) must not overlap s.
void GruCell(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz, const Tensor& su_h,
             const Tensor& s, const Tensor& row_mask, const Tensor& out);
// GruCell's backward from dout (rows, d): WRITES d_rz (rows, 2d) and d_h (rows, d), the gradients
// of the gates' and the candidate's pre-activations (what in_rz and su_rz, and in_h, receive),
// and ACCUMULATES into d_su_h and ds (rows, d), each undefined when not needed.
void GruCellBackward(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz,
                     const Tensor& su_h, const Tensor& s, const Tensor& row_mask,
                     const Tensor& dout, const Tensor& d_rz, const Tensor& d_h,
                     const Tensor& d_su_h, const Tensor& ds);
// scores (rows, S) = tanh(mapped[sentence of row] + q[row]) . u for q (rows, c), mapped (B, S, c)
// with rows a multiple of B (each sentence's rows in a block), u (c).
void AdditiveAttentionScores(const Tensor& q, const Tensor& mapped, const Tensor& u,
                             const Tensor& scores);
// Its backward for beam 1 (q (B, c), mapped (B, S, c)): ACCUMULATES into dq (B, c), dmapped
// (B, S, c) and du (c), each undefined when not needed.
void AdditiveAttentionScoresBackward(const Tensor& q, const Tensor& mapped, const Tensor& u,
                                     const Tensor& dscores, const Tensor& dq, const Tensor& dmapped,
                                     const Tensor& du);

// Whole GRU layers (graph::GruLayer): a layer of models/rnn_layers.h's GRU without layer
// normalization or dropout on its state, run as one call (cuDNN's RNN on a GPU) instead of a step
// kernel and two products per position. Which path graph/ takes is the mode:
enum class GruLayerMode {
  kAuto,       // cuDNN's where the build has it and the layer is on a real GPU; steps elsewhere
  kSteps,      // Tern's step kernels everywhere
  kReference,  // whole layers everywhere: cuDNN's on a real GPU, else the host reference of
               // tensor/cpu/gru_layer.cc (slow: for testing the whole-layer path without a GPU)
};
// The mode, read from TERN_GRU_LAYERS (auto, steps or reference; auto when unset) at first use; an
// unknown value is a one-line error.
GruLayerMode GetGruLayerMode();
void SetGruLayerMode(GruLayerMode mode);  // for tests and benchmarks
// The mode `mode` for the scope's lifetime, the old one after (tests, benchmarks).
class ScopedGruLayerMode {
 public:
  explicit ScopedGruLayerMode(GruLayerMode mode) : old_(GetGruLayerMode()) {
    SetGruLayerMode(mode);
  }
  ~ScopedGruLayerMode() { SetGruLayerMode(old_); }
  ScopedGruLayerMode(const ScopedGruLayerMode&) = delete;
  ScopedGruLayerMode& operator=(const ScopedGruLayerMode&) = delete;

 private:
  GruLayerMode old_;
};
// Whether layers on `device` run whole in the current mode (a real GPU: when the build has cuDNN).
bool WholeGruLayers(Device device);

// call.out (T, B, directions d) = the GRU over call.x (T, B, in) from a zero state: left to right,
// and with 2 directions also right to left into out's second half, with call.weights[k] (Tern's
// layout, tensor/kernel_table.h GruWeights). With a mask, column b has call.lengths[b] >= 1 steps:
// at its padded positions t >= lengths[b] the left-to-right state is the last one repeated and the
// right-to-left one 0 (right to left starts at t = lengths[b] - 1): what the step path computes
// (a masked step carries the state over). call.inputs kBFloat16/kFloat16: the products' operands
// in that type (x may already be), accumulated in float32; a GPU keeps the layer's outputs and
// state in that type too (cuDNN's data type), so they round once a step. call.training keeps in
// call.saved what GruLayerBackward reads; call.arena provides every buffer.
// REQUIRES: WholeGruLayers(x.device()); every tensor but lengths (host) on x's device.
void GruLayerForward(GruLayerCall& call);
// The backward of the GruLayerForward `call` (training) from grads.dout: writes or accumulates
// grads.dx (grads.dx_accumulate) and ACCUMULATES into each defined grads.dweights member. The
// gradient reaching a padded left-to-right position goes to the last state it repeats.
void GruLayerBackward(const GruLayerCall& call, const GruLayerGrads& grads);

double SumSquares(const Tensor& x);
// out (one float32 on x's device) = SumSquares(x), rounded to float, without waiting for it: a
// distributed step all-reduces its ranks' sums there, then ClipToNorm.
void SumSquaresTo(const Tensor& x, const Tensor& out);
// x *= ClipFactor(squared_norm[0], clip_norm) in place (tensor/clip_factor.h: optim::ClipScale's
// factor), the squared norm read where x lives, so a GPU's step need not wait for it.
void ClipToNorm(const Tensor& x, const Tensor& squared_norm, float clip_norm);
// Both on x alone: x *= min(1, clip_norm / ||x||) (x unchanged when its norm is 0 or clip_norm
// <= 0).
void ClipByNorm(const Tensor& x, float clip_norm);

// Optimizer updates (KernelTable::adam_update / sgd_update): 1-D float32 spans of one size on
// one device; out, a host array, only for CPU spans. gate: a StepGate state on their device, or
// undefined (the update always applies, with a's corrections).
void AdamUpdate(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamArgs& a, float* out = nullptr, const Tensor& gate = Tensor());
void SgdUpdate(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a,
               float* out = nullptr, const Tensor& gate = Tensor());

// fp16's loss scaling decided on the gradients' device, so a step never waits for their norm:
// gate (kLossGateSize float32 on squared_norm's device). Before the backward pass the loss
// gradient is multiplied by gate[kGateScale] (ScaleBy); after it, with squared_norm the sum of
// the gradients' squares (SumSquaresTo), this sets gate[kGateApply] (1 finite, 0 not),
// gate[kGateInvScale] = 1 / the scale used, and moves the scale as optim::LossScaler does: halved
// (not below min_scale) with gate[kGateSkipped] + 1 on an overflow, doubled (not above
// max_scale) after `window` good steps in a row.
void LossScaleGate(const Tensor& squared_norm, const Tensor& gate, const LossGateArgs& a);
// An optimizer step gated by apply (one float32, 0 or 1, on state's device): state
// (kStepGateSize float32) gets apply, the bias corrections of t = calls - skipped (skipped
// counting this step when it does not apply) for beta1 and beta2, computed in double as the
// host computes them, and the skipped count. `calls`: the optimizer's steps so far, this one
// included, gated or not.
void StepGate(const Tensor& apply, const Tensor& state, float beta1, float beta2, int64_t calls);
// x *= factor[0] in place (factor one float32 on x's device): a scale the host does not read.
void ScaleBy(const Tensor& x, const Tensor& factor);

}  // namespace tern
