#include "tensor/ops.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "common/error.h"
#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/cpu/bf16_gemm.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cuda_backend.h"

namespace tern {
namespace {

void CheckSame(const Tensor& a, const Tensor& b, const char* what) {
  CHECK(a.shape() == b.shape()) << what << ": shape " << a.shape().ToString() << " vs "
                                << b.shape().ToString();
  CHECK(a.device() == b.device()) << what << ": tensors on different devices";
}

int64_t RowsOf(const Tensor& t, bool trans) { return trans ? t.dim(-1) : t.dim(-2); }
int64_t ColsOf(const Tensor& t, bool trans) { return trans ? t.dim(-2) : t.dim(-1); }

std::atomic<int64_t> gemm_flops{0};
std::atomic<int64_t> operand_roundings{0};
std::atomic<int64_t> device_ops{0};

}  // namespace

int64_t GemmFlops() { return gemm_flops.load(std::memory_order_relaxed); }
int64_t OperandRoundings() { return operand_roundings.load(std::memory_order_relaxed); }
bool NativeProductInputs(Device device, DType inputs) {
  if (inputs == DType::kFloat32 || device != Device::kCpu) return true;
  return inputs == DType::kBFloat16 && cpu::HasBf16GemmKernel();
}

const char* CpuBf16KernelName() {
  return cpu::HasBf16GemmKernel() ? cpu::Bf16KernelName(cpu::ActiveBf16Kernel()) : "none";
}

int64_t DeviceOps() { return device_ops.load(std::memory_order_relaxed) + DeviceCopies(); }

const KernelTable& KernelsFor(Device device) {
  if (device == Device::kCpu) return cpu::Kernels();
  device_ops.fetch_add(1, std::memory_order_relaxed);
  const KernelTable* table = ActiveGpuBackend().kernels();
  if (table == nullptr) Fail("this build of Tern has no CUDA backend (device cuda requested)");
  return *table;
}

namespace {

// A product's checks (types, ranks, shapes) and its count in GemmFlops and OperandRoundings.
void CheckAndCountGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                       const Tensor& c, DType inputs) {
  CHECK(inputs == DType::kFloat32 || inputs == DType::kBFloat16 || inputs == DType::kFloat16)
      << "Gemm inputs " << DTypeName(inputs);
  for (const Tensor* x : {&a, &b}) {
    CHECK(x->dtype() == DType::kFloat32 || x->dtype() == inputs)
        << "Gemm operand of type " << DTypeName(x->dtype()) << " for inputs " << DTypeName(inputs);
  }
  CHECK(c.dtype() == DType::kFloat32) << "Gemm output of type " << DTypeName(c.dtype());
  CHECK(a.rank() == b.rank() && a.rank() == c.rank() && (a.rank() == 2 || a.rank() == 3))
      << "Gemm ranks " << a.rank() << ", " << b.rank() << ", " << c.rank();
  int64_t m = RowsOf(a, trans_a), ka = ColsOf(a, trans_a);
  int64_t kb = RowsOf(b, trans_b), n = ColsOf(b, trans_b);
  CHECK(ka == kb && c.dim(-2) == m && c.dim(-1) == n)
      << "Gemm shapes " << a.shape().ToString() << (trans_a ? "^T" : "") << " @ "
      << b.shape().ToString() << (trans_b ? "^T" : "") << " -> " << c.shape().ToString();
  const int64_t batch = a.rank() == 3 ? a.dim(0) : 1;
  gemm_flops.fetch_add(2 * batch * m * n * ka, std::memory_order_relaxed);
  if (inputs != DType::kFloat32) {
    for (const Tensor* x : {&a, &b})
      if (x->dtype() == DType::kFloat32)
        operand_roundings.fetch_add(x->numel(), std::memory_order_relaxed);
  }
}

}  // namespace

void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha, float beta, DType inputs) {
  if (b.rank() == 2 && a.rank() > 2 && !trans_a) {
    Tensor a2 = a.Flatten2D();
    Tensor c2 = c.Reshape({a2.dim(0), c.cols()});
    Gemm(a2, false, b, trans_b, c2, alpha, beta, inputs);
    return;
  }
  CheckAndCountGemm(a, trans_a, b, trans_b, c, inputs);
  const KernelTable& k = KernelsFor(c.device());
  if (a.rank() == 2) {
    k.gemm(a, trans_a, b, trans_b, c, alpha, beta, inputs);
  } else {
    CHECK(a.dim(0) == b.dim(0) && a.dim(0) == c.dim(0)) << "Gemm batch mismatch";
    k.batched_gemm(a, trans_a, b, trans_b, c, alpha, beta, inputs);
  }
}

void GemmBias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
              const Tensor& c, DType inputs, const Tensor& residual, int activation) {
  if (b.rank() == 2 && a.rank() > 2 && !trans_a) {
    Tensor a2 = a.Flatten2D();
    const Shape c2{a2.dim(0), c.cols()};
    GemmBias(a2, false, b, trans_b, bias, c.Reshape(c2), inputs,
             residual.defined() ? residual.Reshape(c2) : residual, activation);
    return;
  }
  CHECK(activation == kNoActivation ||
        ((activation == kRelu || activation == kGelu) && !residual.defined()))
      << "GemmBias: activation " << activation << " (relu or gelu, without a residual)";
  if (b.rank() == 3) {  // one a, a batch of b
    CHECK(a.rank() == 2 && c.rank() == 3 && b.dim(0) == c.dim(0) &&
          bias.shape() == Shape({b.dim(0), c.dim(2)}) && !residual.defined() &&
          activation == kNoActivation)
        << "GemmBias: a batch of b " << b.shape().ToString() << " takes 2-D a, bias (batch, n), c "
        << "(batch, m, n), no residual or activation; a " << a.shape().ToString() << ", bias "
        << bias.shape().ToString() << ", c " << c.shape().ToString();
    for (int64_t i = 0; i < b.dim(0); ++i) {  // the checks and counts of each product
      CheckAndCountGemm(a, trans_a, b.Slice(i, i + 1).Reshape({b.dim(1), b.dim(2)}), trans_b,
                        c.Slice(i, i + 1).Reshape({c.dim(1), c.dim(2)}), inputs);
    }
    CHECK(bias.dtype() == DType::kFloat32 && bias.device() == c.device())
        << "GemmBias: bias must be float32 on c's device";
    KernelsFor(c.device()).gemm_bias(a, trans_a, b, trans_b, bias, c, inputs, residual, activation);
    return;
  }
  CHECK(a.rank() == 2) << "GemmBias: a 2-D product (or rank-3 a times 2-D b), not a batch";
  CheckAndCountGemm(a, trans_a, b, trans_b, c, inputs);
  CHECK(bias.dtype() == DType::kFloat32 && bias.numel() == c.dim(1) && bias.device() == c.device())
      << "GemmBias: bias " << bias.shape().ToString() << " for c " << c.shape().ToString();
  CHECK(!residual.defined() ||
        (residual.dtype() == DType::kFloat32 && residual.numel() == c.numel() &&
         residual.device() == c.device() && residual.raw() != c.raw()))
      << "GemmBias: residual " << residual.shape().ToString() << " for c " << c.shape().ToString()
      << " (float32, its own memory)";
  KernelsFor(c.device())
      .gemm_bias(a, trans_a, b, trans_b, bias, c, inputs,
                 residual.defined() ? residual.Reshape(c.shape()) : residual, activation);
}

namespace {

void CheckRounding(const Tensor& x, const Tensor& out) {
  CHECK(x.shape() == out.shape() && x.device() == out.device())
      << "RoundOperand " << x.shape().ToString() << " -> " << out.shape().ToString();
  CHECK(x.dtype() == DType::kFloat32 &&
        (out.dtype() == DType::kBFloat16 || out.dtype() == DType::kFloat16))
      << "RoundOperand " << DTypeName(x.dtype()) << " -> " << DTypeName(out.dtype());
  operand_roundings.fetch_add(x.numel(), std::memory_order_relaxed);
}

}  // namespace

void RoundOperand(const Tensor& x, const Tensor& out) {
  CheckRounding(x, out);
  KernelsFor(x.device()).round_operand(x, out);
}

void RoundOperandSumRows(const Tensor& x, const Tensor& out, const Tensor& sums) {
  CHECK(sums.dtype() == DType::kFloat32 && sums.numel() == x.cols() && sums.device() == x.device())
      << "RoundOperandSumRows: sums " << sums.shape().ToString() << " for x "
      << x.shape().ToString() << " (float32, x's columns, x's device)";
  const KernelTable& kernels = KernelsFor(x.device());
  if (kernels.round_operand_sum_rows == nullptr) {
    RoundOperand(x, out);
    SumRows(x, sums, 1.f);
    return;
  }
  CheckRounding(x, out);
  kernels.round_operand_sum_rows(x, out, sums);
}

void Fill(const Tensor& x, float value) { KernelsFor(x.device()).fill(x, value); }

void Copy(const Tensor& src, const Tensor& dst) {
  CHECK_EQ(src.bytes(), dst.bytes())
      << "Copy " << src.shape().ToString() << " -> " << dst.shape().ToString();
  CopyBytes(dst.raw(), dst.device(), src.raw(), src.device(), src.bytes());
}

void Add(const Tensor& a, const Tensor& b, const Tensor& out, float alpha, float beta) {
  CheckSame(a, b, "Add");
  CheckSame(a, out, "Add");
  KernelsFor(out.device()).add(a, b, out, alpha, beta);
}

void Mul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  CheckSame(a, b, "Mul");
  CheckSame(a, out, "Mul");
  KernelsFor(out.device()).mul(a, b, out, accumulate);
}

void Scale(const Tensor& x, float alpha) { Add(x, x, x, alpha, 0.f); }

void AddBias(const Tensor& x, const Tensor& bias) {
  CHECK_EQ(x.cols(), bias.numel())
      << "AddBias " << x.shape().ToString() << " + " << bias.shape().ToString();
  KernelsFor(x.device()).add_bias(x, bias);
}

void DivideRows(const Tensor& x, const Tensor& divisors) {
  CHECK_EQ(x.rows(), divisors.numel())
      << "DivideRows " << x.shape().ToString() << " / " << divisors.shape().ToString();
  CHECK(divisors.device() == x.device() && divisors.dtype() == DType::kFloat32)
      << "DivideRows: float32 divisors on x's device";
  KernelsFor(x.device()).divide_rows(x, divisors);
}

void SumRows(const Tensor& x, const Tensor& out, float beta) {
  CHECK_EQ(x.cols(), out.numel());
  KernelsFor(x.device()).sum_rows(x, out, beta);
}

void Unary(UnaryOp op, const Tensor& x, const Tensor& out) {
  CheckSame(x, out, "Unary");
  KernelsFor(x.device()).unary(op, x, out);
}

void UnaryBackward(UnaryOp op, const Tensor& y, const Tensor& dy, const Tensor& dx,
                   bool accumulate) {
  CheckSame(y, dy, "UnaryBackward");
  CheckSame(y, dx, "UnaryBackward");
  KernelsFor(y.device()).unary_backward(op, y, dy, dx, accumulate);
}

void Softmax(const Tensor& x, const Tensor& out, const Tensor& key_mask, bool causal, float scale) {
  CheckSame(x, out, "Softmax");
  if (key_mask.defined()) {
    CHECK(x.rank() == 4 && key_mask.rank() == 2 && key_mask.dim(0) == x.dim(0) &&
          key_mask.dim(1) == x.dim(3))
        << "Softmax key_mask " << key_mask.shape().ToString() << " for " << x.shape().ToString();
  }
  if (causal) CHECK_EQ(x.rank(), 4) << "causal Softmax needs (batch, heads, tq, tk)";
  KernelsFor(x.device()).softmax(x, out, key_mask, causal, scale);
}

void SoftmaxBackward(const Tensor& y, const Tensor& dy, const Tensor& dx, float scale,
                     bool accumulate) {
  CheckSame(y, dy, "SoftmaxBackward");
  CheckSame(y, dx, "SoftmaxBackward");
  KernelsFor(y.device()).softmax_backward(y, dy, dx, scale, accumulate);
}

void LogSoftmax(const Tensor& x, const Tensor& out) {
  CheckSame(x, out, "LogSoftmax");
  KernelsFor(x.device()).log_softmax(x, out);
}

void LayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
               const Tensor& mean, const Tensor& rstd, float eps) {
  CheckSame(x, out, "LayerNorm");
  CHECK(gamma.numel() == x.cols() && beta.numel() == x.cols() && mean.numel() == x.rows() &&
        rstd.numel() == x.rows())
      << "LayerNorm shapes";
  KernelsFor(x.device()).layer_norm(x, gamma, beta, out, mean, rstd, eps);
}

void LayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                       const Tensor& dy, const Tensor& dx, const Tensor& dgamma,
                       const Tensor& dbeta, bool accumulate) {
  CheckSame(x, dy, "LayerNormBackward");
  CheckSame(x, dx, "LayerNormBackward");
  KernelsFor(x.device())
      .layer_norm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, accumulate);
}

void CrossEntropy(const Tensor& logits, const Tensor& targets, float smoothing, int32_t ignore_id,
                  const Tensor& loss, const Tensor& lse) {
  CHECK(targets.dtype() == DType::kInt32 && targets.numel() == logits.rows() &&
        loss.numel() == logits.rows() && lse.numel() == logits.rows())
      << "CrossEntropy shapes " << logits.shape().ToString() << " " << targets.shape().ToString();
  KernelsFor(logits.device()).cross_entropy(logits, targets, smoothing, ignore_id, loss, lse);
}

void CrossEntropyBackward(const Tensor& logits, const Tensor& targets, float smoothing,
                          int32_t ignore_id, const Tensor& lse, const Tensor& dloss,
                          const Tensor& dlogits, bool accumulate) {
  CheckSame(logits, dlogits, "CrossEntropyBackward");
  CHECK_EQ(dloss.numel(), logits.rows());
  KernelsFor(logits.device())
      .cross_entropy_backward(logits, targets, smoothing, ignore_id, lse, dloss, dlogits,
                              accumulate);
}

void GatherRows(const Tensor& table, const Tensor& ids, const Tensor& out, float scale) {
  CHECK(ids.dtype() == DType::kInt32 && out.rows() == ids.numel() && out.cols() == table.cols())
      << "GatherRows " << table.shape().ToString() << "[" << ids.shape().ToString() << "] -> "
      << out.shape().ToString();
  KernelsFor(table.device()).gather_rows(table, ids, out, scale);
}

void ScatterAddRows(const Tensor& dout, const Tensor& ids, const Tensor& dtable, float scale) {
  CHECK(ids.dtype() == DType::kInt32 && dout.rows() == ids.numel() && dout.cols() == dtable.cols())
      << "ScatterAddRows shapes";
  KernelsFor(dtable.device()).scatter_add_rows(dout, ids, dtable, scale);
}

void Permute0213(const Tensor& in, const Tensor& out, bool accumulate) {
  CHECK(in.rank() == 4 && out.rank() == 4 && in.dim(0) == out.dim(0) && in.dim(1) == out.dim(2) &&
        in.dim(2) == out.dim(1) && in.dim(3) == out.dim(3))
      << "Permute0213 " << in.shape().ToString() << " -> " << out.shape().ToString();
  KernelsFor(in.device()).permute_0213(in, out, accumulate);
}

void GatherAppend(const Tensor& past, const Tensor& ids, int64_t skip, const Tensor& next,
                  const Tensor& out) {
  CHECK(out.rank() == 4 && out.dtype() == DType::kFloat32) << "GatherAppend: out must be 4-D";
  const int64_t rows = out.dim(0), a = out.dim(1), t1 = out.dim(2), c = out.dim(3);
  int64_t kept = 0;
  if (past.defined()) {
    CHECK(past.rank() == 4 && past.dim(1) == a && past.dim(3) == c && past.device() == out.device())
        << "GatherAppend: past " << past.shape().ToString() << ", out " << out.shape().ToString();
    CHECK(skip >= 0 && skip <= past.dim(2)) << "GatherAppend: skip " << skip;
    kept = past.dim(2) - skip;
    if (ids.defined()) {
      CHECK(ids.dtype() == DType::kInt32 && ids.numel() == rows && ids.device() == out.device())
          << "GatherAppend: ids must be int32 (" << rows << ")";
    } else {
      CHECK_EQ(past.dim(0), rows) << "GatherAppend: without ids past and out have the same rows";
    }
  }
  if (next.defined()) {
    CHECK(next.numel() == rows * a * c && next.device() == out.device())
        << "GatherAppend: next " << next.shape().ToString() << ", out " << out.shape().ToString();
  }
  CHECK_GE(t1, kept + (next.defined() ? 1 : 0)) << "GatherAppend: out has too few positions";
  KernelsFor(out.device()).gather_append(past, ids, skip, next, out);
}

void Attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
            const Tensor& kv_rows, bool causal, float scale, const Tensor& out) {
  CHECK(q.rank() == 4 && k.rank() == 4 && out.rank() == 4)
      << "Attend: q (B, H, Tq, dk), k, v (S, H, Tk, dk), out (B, Tq, H, dk)";
  const int64_t b = q.dim(0), h = q.dim(1), tq = q.dim(2), dk = q.dim(3);
  const int64_t s = k.dim(0), tk = k.dim(2);
  CHECK(k.dim(1) == h && k.dim(3) == dk && v.shape() == k.shape() &&
        out.shape() == Shape({b, tq, h, dk}))
      << "Attend: q " << q.shape().ToString() << ", k " << k.shape().ToString() << ", v "
      << v.shape().ToString() << ", out " << out.shape().ToString();
  CHECK(!key_mask.defined() || key_mask.shape() == Shape({s, tk}))
      << "Attend: key_mask " << key_mask.shape().ToString() << " for k " << k.shape().ToString();
  CHECK(kv_rows.defined() ? kv_rows.dtype() == DType::kInt32 && kv_rows.numel() == b : s == b)
      << "Attend: kv_rows must be int32 (" << b << "), or k hold one sentence per query sentence";
  CHECK(!causal || tq <= tk) << "Attend: causal with " << tq << " queries for " << tk << " keys";
  for (const Tensor* t : {&q, &k, &v, &key_mask, &kv_rows}) {
    CHECK(!t->defined() || t->device() == out.device()) << "Attend: tensors on two devices";
  }
  CHECK(out.device() == Device::kCpu || dk <= kAttendMaxHeadWidth)
      << "Attend: heads of width " << dk << " on a GPU (at most " << kAttendMaxHeadWidth << ")";
  if (out.numel() == 0) return;
  KernelsFor(out.device()).attend(q, k, v, key_mask, kv_rows, causal, scale, out);
}

void Clamp(const Tensor& x, float lo, float hi) {
  CHECK(x.dtype() == DType::kFloat32 && lo <= hi) << "Clamp: float32 x and lo <= hi";
  KernelsFor(x.device()).clamp(x, lo, hi);
}

namespace {

// GruCell's and GruCellBackward's shared checks.
void CheckGruShapes(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz,
                    const Tensor& su_h, const Tensor& s, const Tensor& row_mask) {
  CHECK(s.rank() == 2) << "GruCell: s must be (rows, d)";
  const int64_t rows = s.dim(0), d = s.dim(1);
  CHECK(su_rz.shape() == Shape({rows, 2 * d}) && su_h.shape() == s.shape())
      << "GruCell: su_rz " << su_rz.shape().ToString() << ", su_h " << su_h.shape().ToString()
      << " for s " << s.shape().ToString();
  CHECK(in_rz.rank() == 2 && in_rz.dim(1) == 2 * d && in_h.rank() == 2 && in_h.dim(1) == d &&
        in_rz.dim(0) == in_h.dim(0) && (in_rz.dim(0) == rows || in_rz.dim(0) == 1))
      << "GruCell: in_rz " << in_rz.shape().ToString() << ", in_h " << in_h.shape().ToString()
      << " for s " << s.shape().ToString();
  CHECK(!row_mask.defined() || row_mask.numel() == rows) << "GruCell: row_mask must be (rows)";
  for (const Tensor* t : {&in_rz, &in_h, &su_rz, &su_h, &row_mask}) {
    CHECK(!t->defined() || t->device() == s.device()) << "GruCell: tensors on two devices";
  }
}

}  // namespace

void GruCell(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz, const Tensor& su_h,
             const Tensor& s, const Tensor& row_mask, const Tensor& out) {
  CheckGruShapes(in_rz, in_h, su_rz, su_h, s, row_mask);
  CheckSame(s, out, "GruCell");
  KernelsFor(s.device()).gru_cell(in_rz, in_h, su_rz, su_h, s, row_mask, out);
}

void GruCellBackward(const Tensor& in_rz, const Tensor& in_h, const Tensor& su_rz,
                     const Tensor& su_h, const Tensor& s, const Tensor& row_mask,
                     const Tensor& dout, const Tensor& d_rz, const Tensor& d_h,
                     const Tensor& d_su_h, const Tensor& ds) {
  CheckGruShapes(in_rz, in_h, su_rz, su_h, s, row_mask);
  CheckSame(s, dout, "GruCellBackward");
  CHECK(d_rz.shape() == su_rz.shape() && d_rz.device() == s.device())
      << "GruCellBackward: d_rz must be shaped as su_rz";
  CheckSame(s, d_h, "GruCellBackward");
  if (d_su_h.defined()) CheckSame(s, d_su_h, "GruCellBackward");
  if (ds.defined()) CheckSame(s, ds, "GruCellBackward");
  KernelsFor(s.device())
      .gru_cell_backward(in_rz, in_h, su_rz, su_h, s, row_mask, dout, d_rz, d_h, d_su_h, ds);
}

void AdditiveAttentionScores(const Tensor& q, const Tensor& mapped, const Tensor& u,
                             const Tensor& scores) {
  CHECK(q.rank() == 2 && mapped.rank() == 3 && scores.rank() == 2)
      << "AdditiveAttentionScores: q (rows, c), mapped (B, S, c), scores (rows, S)";
  const int64_t rows = q.dim(0), c = q.dim(1), batch = mapped.dim(0);
  CHECK(batch > 0 && rows % batch == 0 && mapped.dim(2) == c && u.numel() == c &&
        scores.dim(0) == rows && scores.dim(1) == mapped.dim(1))
      << "AdditiveAttentionScores: q " << q.shape().ToString() << ", mapped "
      << mapped.shape().ToString() << ", u " << u.shape().ToString() << ", scores "
      << scores.shape().ToString();
  CHECK(mapped.device() == q.device() && u.device() == q.device() && scores.device() == q.device())
      << "AdditiveAttentionScores: tensors on two devices";
  KernelsFor(q.device()).additive_attention_scores(q, mapped, u, scores);
}

void AdditiveAttentionScoresBackward(const Tensor& q, const Tensor& mapped, const Tensor& u,
                                     const Tensor& dscores, const Tensor& dq, const Tensor& dmapped,
                                     const Tensor& du) {
  CHECK(q.rank() == 2 && mapped.rank() == 3 && q.dim(0) == mapped.dim(0) &&
        mapped.dim(2) == q.dim(1) && u.numel() == q.dim(1) &&
        dscores.shape() == Shape({q.dim(0), mapped.dim(1)}))
      << "AdditiveAttentionScoresBackward: q " << q.shape().ToString() << ", mapped "
      << mapped.shape().ToString() << ", u " << u.shape().ToString() << ", dscores "
      << dscores.shape().ToString();
  CHECK((!dq.defined() || dq.shape() == q.shape()) &&
        (!dmapped.defined() || dmapped.shape() == mapped.shape()) &&
        (!du.defined() || du.numel() == u.numel()))
      << "AdditiveAttentionScoresBackward: gradients shaped unlike their inputs";
  Tensor du_rows;
  if (du.defined()) du_rows = Tensor::Empty(q.shape(), DType::kFloat32, q.device());
  KernelsFor(q.device())
      .additive_attention_scores_backward(q, mapped, u, dscores, dq, dmapped, du_rows);
  if (du.defined()) SumRows(du_rows, du.Reshape({du.numel()}), 1.f);
}

namespace {

std::atomic<int> gru_layer_mode{-1};  // -1: not read from the environment yet

GruLayerMode GruLayerModeFromEnvironment() {
  const char* v = std::getenv("TERN_GRU_LAYERS");
  if (v == nullptr || std::strcmp(v, "") == 0 || std::strcmp(v, "auto") == 0)
    return GruLayerMode::kAuto;
  if (std::strcmp(v, "steps") == 0) return GruLayerMode::kSteps;
  if (std::strcmp(v, "reference") == 0) return GruLayerMode::kReference;
  Fail("TERN_GRU_LAYERS=", v, ": unknown; use auto, steps or reference");
}

void CheckGruWeights(const GruWeights& w, int64_t in, int64_t d, Device device, bool grads) {
  const char* what = grads ? "GruLayerBackward: a weight gradient" : "GruLayerForward: a weight";
  const std::pair<const Tensor*, Shape> expected[] = {
      {&w.w, Shape{in, 2 * d}}, {&w.wx, Shape{in, d}}, {&w.u, Shape{d, 2 * d}},
      {&w.ux, Shape{d, d}},     {&w.b, Shape{2 * d}},  {&w.bx, Shape{d}}};
  for (const auto& [t, shape] : expected) {
    if (grads && !t->defined()) continue;
    CHECK(t->defined() && t->dtype() == DType::kFloat32 && t->numel() == shape.numel() &&
          t->device() == device)
        << what << " is not " << shape.ToString() << " float32 on the layer's device";
  }
}

}  // namespace

GruLayerMode GetGruLayerMode() {
  int mode = gru_layer_mode.load(std::memory_order_relaxed);
  if (mode < 0) {
    mode = static_cast<int>(GruLayerModeFromEnvironment());
    gru_layer_mode.store(mode, std::memory_order_relaxed);
  }
  return static_cast<GruLayerMode>(mode);
}

void SetGruLayerMode(GruLayerMode mode) {
  gru_layer_mode.store(static_cast<int>(mode), std::memory_order_relaxed);
}

bool WholeGruLayers(Device device) {
  const GruLayerMode mode = GetGruLayerMode();
  if (mode == GruLayerMode::kSteps) return false;
  if (device == Device::kCpu) return mode == GruLayerMode::kReference;
  if (!CudaAvailable()) return false;
  // The emulated GPU runs the host reference: only when asked for, as the CPU.
  if (GpuEmulated() && mode == GruLayerMode::kAuto) return false;
  const KernelTable* table = ActiveGpuBackend().kernels();
  return table != nullptr && table->gru_layer != nullptr;
}

void GruLayerForward(GruLayerCall& call) {
  const Tensor& x = call.x;
  CHECK(x.rank() == 3 && (x.dtype() == DType::kFloat32 || x.dtype() == call.inputs))
      << "GruLayerForward: x " << x.shape().ToString() << " of type " << DTypeName(x.dtype());
  CHECK(call.directions == 1 || call.directions == 2) << "GruLayerForward: directions";
  CHECK(call.arena != nullptr && call.arena->device() == x.device())
      << "GruLayerForward: an arena on the layer's device";
  CHECK(WholeGruLayers(x.device())) << "GruLayerForward: whole GRU layers are off on "
                                    << DeviceName(x.device()) << " (WholeGruLayers)";
  const int64_t len = x.dim(0), batch = x.dim(1), in = x.dim(2);
  const int64_t d = call.weights[0].ux.defined() ? call.weights[0].ux.dim(0) : 0;
  for (int k = 0; k < call.directions; ++k)
    CheckGruWeights(call.weights[k], in, d, x.device(), false);
  CHECK(call.out.shape() == Shape({len, batch, call.directions * d}) &&
        call.out.dtype() == DType::kFloat32 && call.out.device() == x.device())
      << "GruLayerForward: out " << call.out.shape().ToString();
  CHECK(call.mask.defined() == call.lengths.defined())
      << "GruLayerForward: a mask needs its lengths on the host, and lengths a mask";
  if (call.mask.defined()) {
    CHECK(call.mask.shape() == Shape({len, batch}) && call.mask.device() == x.device())
        << "GruLayerForward: mask " << call.mask.shape().ToString();
    CHECK(call.lengths.device() == Device::kCpu && call.lengths.dtype() == DType::kInt32 &&
          call.lengths.numel() == batch)
        << "GruLayerForward: lengths must be (batch) int32 on the host";
    for (int64_t b = 0; b < batch; ++b) {
      const int32_t steps = call.lengths.i32()[b];
      CHECK(steps >= 1 && steps <= len)
          << "GruLayerForward: column " << b << " has " << steps << " steps of " << len;
    }
  }
  KernelsFor(x.device()).gru_layer(call);
}

void GruLayerBackward(const GruLayerCall& call, const GruLayerGrads& grads) {
  CHECK(call.training) << "GruLayerBackward of a forward call made without training";
  CheckSame(call.out, grads.dout, "GruLayerBackward (dout)");
  if (grads.dx.defined()) {
    CHECK(grads.dx.dtype() == DType::kFloat32 && grads.dx.device() == call.x.device() &&
          grads.dx.numel() == call.x.numel())
        << "GruLayerBackward: dx " << grads.dx.shape().ToString();
  }
  const int64_t in = call.x.dim(2), d = call.out.dim(2) / call.directions;
  for (int k = 0; k < call.directions; ++k)
    CheckGruWeights(grads.dweights[k], in, d, call.x.device(), true);
  KernelsFor(call.x.device()).gru_layer_backward(call, grads);
}

void DropoutMask(const Tensor& mask, float keep_prob, uint64_t seed) {
  CHECK(keep_prob > 0.f && keep_prob <= 1.f);
  KernelsFor(mask.device()).dropout_mask(mask, keep_prob, seed);
}

void Dropout(const Tensor& x, const Tensor& out, float keep_prob, uint64_t seed,
             const Tensor& base) {
  CHECK(keep_prob > 0.f && keep_prob <= 1.f);
  CheckSame(x, out, "Dropout");
  if (base.defined()) CheckSame(base, out, "Dropout");
  KernelsFor(x.device()).dropout(x, base, out, keep_prob, seed);
}

double SumSquares(const Tensor& x) {
  double out = 0;
  KernelsFor(x.device()).sum_squares(x, &out);
  return out;
}

void SumSquaresTo(const Tensor& x, const Tensor& out) {
  CHECK(x.dtype() == DType::kFloat32) << "SumSquaresTo: float32 only";
  CHECK(out.dtype() == DType::kFloat32 && out.numel() == 1 && out.device() == x.device())
      << "SumSquaresTo: out must be one float32 on x's device";
  KernelsFor(x.device()).sum_squares_to(x, out);
}

void ClipToNorm(const Tensor& x, const Tensor& squared_norm, float clip_norm) {
  CHECK(x.dtype() == DType::kFloat32) << "ClipToNorm: float32 only";
  CHECK(squared_norm.dtype() == DType::kFloat32 && squared_norm.numel() == 1 &&
        squared_norm.device() == x.device())
      << "ClipToNorm: the squared norm must be one float32 on x's device";
  if (clip_norm <= 0.f || x.numel() == 0) return;
  KernelsFor(x.device()).clip_to_norm(x, squared_norm, clip_norm);
}

void ClipByNorm(const Tensor& x, float clip_norm) {
  if (clip_norm <= 0.f || x.numel() == 0) return;
  const Tensor squared_norm = Tensor::Empty(Shape{1}, DType::kFloat32, x.device());
  SumSquaresTo(x, squared_norm);
  ClipToNorm(x, squared_norm, clip_norm);
}

namespace {

void CheckSpans(std::initializer_list<const Tensor*> spans, const float* out, const char* what) {
  const Tensor& p = **spans.begin();
  CHECK(p.rank() == 1 && p.dtype() == DType::kFloat32)
      << what << ": params must be a flat float32 span";
  for (const Tensor* t : spans) CheckSame(p, *t, what);
  CHECK(out == nullptr || p.device() == Device::kCpu) << what << ": out is for CPU spans only";
}

void CheckGate(const Tensor& gate, int64_t size, const Tensor& like, const char* what) {
  CHECK(gate.dtype() == DType::kFloat32 && gate.numel() == size && gate.device() == like.device())
      << what << ": the gate must be " << size << " float32 on " << DeviceName(like.device());
}

}  // namespace

void AdamUpdate(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
                const AdamArgs& a, float* out, const Tensor& gate) {
  CheckSpans({&p, &g, &m, &v}, out, "AdamUpdate");
  if (gate.defined()) CheckGate(gate, kStepGateSize, p, "AdamUpdate");
  KernelsFor(p.device()).adam_update(p, g, m, v, a, gate, out);
}

void SgdUpdate(const Tensor& p, const Tensor& g, const Tensor& u, const SgdArgs& a, float* out,
               const Tensor& gate) {
  CheckSpans({&p, &g, &u}, out, "SgdUpdate");
  if (gate.defined()) CheckGate(gate, kStepGateSize, p, "SgdUpdate");
  KernelsFor(p.device()).sgd_update(p, g, u, a, gate, out);
}

void LossScaleGate(const Tensor& squared_norm, const Tensor& gate, const LossGateArgs& a) {
  CheckGate(squared_norm, 1, gate, "LossScaleGate (squared norm)");
  CheckGate(gate, kLossGateSize, squared_norm, "LossScaleGate");
  CHECK(a.window >= 1.f && a.min_scale > 0.f && a.max_scale >= a.min_scale)
      << "LossScaleGate: window " << a.window << ", scales " << a.min_scale << ".." << a.max_scale;
  KernelsFor(gate.device()).loss_scale_gate(squared_norm, gate, a);
}

void StepGate(const Tensor& apply, const Tensor& state, float beta1, float beta2, int64_t calls) {
  CheckGate(apply, 1, state, "StepGate (apply)");
  CheckGate(state, kStepGateSize, apply, "StepGate");
  CHECK_GE(calls, 1) << "StepGate: calls counts this step";
  KernelsFor(state.device()).step_gate(apply, state, beta1, beta2, static_cast<double>(calls));
}

void ScaleBy(const Tensor& x, const Tensor& factor) {
  CHECK(x.dtype() == DType::kFloat32) << "ScaleBy: float32 only";
  CheckGate(factor, 1, x, "ScaleBy (factor)");
  if (x.numel() == 0) return;
  KernelsFor(x.device()).scale_by(x, factor);
}

}  // namespace tern
