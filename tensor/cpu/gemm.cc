// Float32 matrix products through the BLAS (OpenBLAS), parallelized by Tern's own thread pool.
//
// OpenBLAS runs single-threaded (tensor/threads.cc): its own threads spin in sched_yield between
// calls and fought the pool's threads for the two cores, costing ~20% of a training step. Instead
// each product is split into one block of rows (or columns) of C per pool thread, each a serial
// BLAS call on a view, and batched products run one batch entry per thread.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/thread_pool.h"
#include "tensor/cpu/bf16_gemm.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/low_precision.h"

namespace tern::cpu {
namespace {

// Products smaller than this run on the calling thread.
constexpr double kParallelFlops = 2e6;

struct GemmArgs {
  bool ta, tb;
  int m, n, k;
  float alpha, beta;
  const float* a;
  int lda;
  const float* b;
  int ldb;
  float* c;
  int ldc;
};

void SerialGemm(const GemmArgs& g) {
  if (g.m == 0 || g.n == 0) return;
  cblas_sgemm(CblasRowMajor, g.ta ? CblasTrans : CblasNoTrans, g.tb ? CblasTrans : CblasNoTrans,
              g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc);
}

// Splits C into row blocks (or column blocks when it is wide) over the pool.
void ParallelGemm(const GemmArgs& g) {
  const double flops = 2.0 * g.m * g.n * g.k;
  const int threads = NumThreads();
  if (threads == 1 || flops < kParallelFlops) {
    SerialGemm(g);
    return;
  }
  const bool split_rows = g.m >= g.n;
  const int64_t extent = split_rows ? g.m : g.n;
  // Blocks of a multiple of 16 so the BLAS kernels see whole panels.
  const int64_t block = std::max<int64_t>(16, (extent + threads - 1) / threads + 15) / 16 * 16;
  const int64_t blocks = (extent + block - 1) / block;
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t lo = i * block, hi = std::min(extent, lo + block);
      GemmArgs part = g;
      if (split_rows) {
        part.m = static_cast<int>(hi - lo);
        part.a = g.ta ? g.a + lo : g.a + lo * g.lda;  // rows of op(a)
        part.c = g.c + lo * g.ldc;
      } else {
        part.n = static_cast<int>(hi - lo);
        part.b = g.tb ? g.b + lo * g.ldb : g.b + lo;  // columns of op(b)
        part.c = g.c + lo;
      }
      SerialGemm(part);
    }
  });
}

GemmArgs Args(const float* a, bool ta, const Shape& sa, const float* b, bool tb, const Shape& sb,
              float* c, const Shape& sc, float alpha, float beta) {
  GemmArgs g;
  g.ta = ta;
  g.tb = tb;
  g.m = static_cast<int>(sc[-2]);
  g.n = static_cast<int>(sc[-1]);
  g.k = static_cast<int>(ta ? sa[-2] : sa[-1]);
  g.alpha = alpha;
  g.beta = beta;
  g.a = a;
  g.lda = static_cast<int>(sa[-1]);
  g.b = b;
  g.ldb = static_cast<int>(sb[-1]);
  g.c = c;
  g.ldc = g.n;
  return g;
}

// x's values, or (mixed precision) a copy of them rounded to `inputs`, in `*buffer`: rounded
// here from float32, or read from a bf16/fp16 operand that RoundOperand made.
const float* Operand(const Tensor& x, DType inputs, std::vector<float>* buffer) {
  if (inputs == DType::kFloat32) return x.f32();
  const int64_t n = x.numel();
  buffer->resize(n);
  float* out = buffer->data();
  if (x.dtype() == inputs) {
    const uint16_t* in = x.data<uint16_t>();
    ParallelFor(n, 1 << 14, [=](int64_t b, int64_t e) {
      if (inputs == DType::kBFloat16) {
        for (int64_t i = b; i < e; ++i) out[i] = FromBFloat16Bits(in[i]);
      } else {
        for (int64_t i = b; i < e; ++i) out[i] = FromFloat16Bits(in[i]);
      }
    });
    return out;
  }
  const float* in = x.f32();
  ParallelFor(n, 1 << 14, [=](int64_t b, int64_t e) {
    if (inputs == DType::kBFloat16) {
      for (int64_t i = b; i < e; ++i) out[i] = RoundToBFloat16(in[i]);
    } else {
      for (int64_t i = b; i < e; ++i) out[i] = RoundToFloat16(in[i]);
    }
  });
  return out;
}

// The rounded operands' buffers, kept for the next product.
thread_local std::vector<float> rounded_a, rounded_b;

// bf16 products on a CPU with AVX512-BF16: through Bf16Gemm instead of rounded floats and the
// BLAS. x is float32 (rounded while packed) or already bf16 (RoundOperand's).
bool UseBf16Kernel(DType inputs) { return inputs == DType::kBFloat16 && HasBf16GemmKernel(); }

Bf16Operand Bf16Of(const Tensor& x, bool transposed, const float* f32) {
  return {x.dtype() == DType::kBFloat16 ? static_cast<const void*>(x.data<uint16_t>()) : f32,
          x.dtype() == DType::kBFloat16, x.shape()[-1], transposed};
}

// A product through the bf16 kernel, bias (float32, or undefined) added by its epilogue.
void Bf16TensorProduct(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                       const Tensor& c, float alpha, float beta, const Tensor& bias) {
  const GemmArgs g = Args(a.dtype() == DType::kFloat32 ? a.f32() : nullptr, trans_a, a.shape(),
                          b.dtype() == DType::kFloat32 ? b.f32() : nullptr, trans_b, b.shape(),
                          c.f32(), c.shape(), alpha, beta);
  Bf16Gemm(Bf16Of(a, g.ta, g.a), Bf16Of(b, g.tb, g.b), g.m, g.n, g.k, g.alpha, g.beta, g.c, g.ldc,
           /*serial=*/false, bias.defined() ? bias.f32() : nullptr);
}

}  // namespace

void Gemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
          float alpha, float beta, DType inputs) {
  if (UseBf16Kernel(inputs)) {
    Bf16TensorProduct(a, trans_a, b, trans_b, c, alpha, beta, Tensor());
    return;
  }
  ParallelGemm(Args(Operand(a, inputs, &rounded_a), trans_a, a.shape(),
                    Operand(b, inputs, &rounded_b), trans_b, b.shape(), c.f32(), c.shape(), alpha,
                    beta));
}

void GemmBias(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& bias,
              const Tensor& c, DType inputs, const Tensor& residual, int activation) {
  if (b.rank() == 3) {  // each b[i]: the bits of its own product
    for (int64_t i = 0; i < b.dim(0); ++i) {
      GemmBias(a, trans_a, b.Slice(i, i + 1).Reshape({b.dim(1), b.dim(2)}), trans_b,
               bias.Slice(i, i + 1).Reshape({bias.dim(1)}),
               c.Slice(i, i + 1).Reshape({c.dim(1), c.dim(2)}), inputs, residual, activation);
    }
    return;
  }
  if (UseBf16Kernel(inputs) && !residual.defined() && bias.dtype() == DType::kFloat32) {
    Bf16TensorProduct(a, trans_a, b, trans_b, c, 1.f, 0.f, bias);  // the kernel adds the bias
  } else {
    Gemm(a, trans_a, b, trans_b, c, 1.f, 0.f, inputs);
    if (residual.defined()) {
      AddBiasResidual(c, bias, residual);
    } else {
      AddBias(c, bias);
    }
  }
  if (activation != kNoActivation) Unary(activation, c, c);
}

void BatchedGemm(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
                 float alpha, float beta, DType inputs) {
  const int64_t batch = a.dim(0);
  if (UseBf16Kernel(inputs)) {
    const Shape sa{a.dim(1), a.dim(2)}, sb{b.dim(1), b.dim(2)}, sc{c.dim(1), c.dim(2)};
    const int64_t ea = a.dim(1) * a.dim(2), eb = b.dim(1) * b.dim(2), ec = c.dim(1) * c.dim(2);
    const bool a16 = a.dtype() == DType::kBFloat16, b16 = b.dtype() == DType::kBFloat16;
    const void* pa = a16 ? static_cast<const void*>(a.data<uint16_t>()) : a.f32();
    const void* pb = b16 ? static_cast<const void*>(b.data<uint16_t>()) : b.f32();
    const GemmArgs g = Args(nullptr, trans_a, sa, nullptr, trans_b, sb, c.f32(), sc, alpha, beta);
    ParallelFor(batch, 1, [&](int64_t b0, int64_t b1) {
      const Bf16Operand oa{pa, a16, sa[-1], trans_a}, ob{pb, b16, sb[-1], trans_b};
      Bf16GemmBatch(Advance(oa, b0 * ea), ea, Advance(ob, b0 * eb), eb, b1 - b0, g.m, g.n, g.k,
                    alpha, beta, c.f32() + b0 * ec, ec, g.ldc);
    });
    return;
  }
  const int64_t sa = a.dim(1) * a.dim(2), sb = b.dim(1) * b.dim(2), sc = c.dim(1) * c.dim(2);
  const GemmArgs g0 =
      Args(Operand(a, inputs, &rounded_a), trans_a, a.shape(), Operand(b, inputs, &rounded_b),
           trans_b, b.shape(), c.f32(), c.shape(), alpha, beta);
  auto entry = [&](int64_t i) {
    GemmArgs g = g0;
    g.a += i * sa;
    g.b += i * sb;
    g.c += i * sc;
    return g;
  };
  if (batch >= NumThreads()) {
    ParallelFor(batch, 1, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) SerialGemm(entry(i));
    });
  } else {
    for (int64_t i = 0; i < batch; ++i) ParallelGemm(entry(i));
  }
}

namespace {

// BFloat16Bits without its branch, so that the loops below vectorize (integer steps only: every
// clone gives the same bits, the AVX-512 one twice as many a step).
inline uint16_t BFloat16BitsNoBranch(const float* x) {
  uint32_t u;
  std::memcpy(&u, x, 4);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}

TERN_MULTIVERSION_V4 void BFloat16BitsOf(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = BFloat16BitsNoBranch(in + i);
}

// BFloat16BitsOf and sums[i] += in[i] (SumRows's row step) in one pass over the row.
TERN_MULTIVERSION_V4 void BFloat16BitsAndSumOf(const float* in, uint16_t* out, float* sums,
                                               int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = BFloat16BitsNoBranch(in + i);
    sums[i] += in[i];
  }
}

}  // namespace

void RoundOperandSumRows(const Tensor& x, const Tensor& out, const Tensor& sums) {
  if (out.dtype() != DType::kBFloat16) {
    RoundOperand(x, out);
    SumRows(x, sums, 1.f);
    return;
  }
  const int64_t n = x.cols(), rows = x.rows();
  const float* in = x.f32();
  uint16_t* bits = out.data<uint16_t>();
  float* po = sums.f32();
  // SumRows's split (columns, each summed over the rows in order), so its bits.
  ParallelFor(n, 256, [=](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rows; ++r)
      BFloat16BitsAndSumOf(in + r * n + c0, bits + r * n + c0, po + c0, c1 - c0);
  });
}

void RoundOperand(const Tensor& x, const Tensor& out) {
  const float* in = x.f32();
  uint16_t* bits = out.data<uint16_t>();
  const bool bf16 = out.dtype() == DType::kBFloat16;
  ParallelFor(x.numel(), 1 << 14, [=](int64_t b, int64_t e) {
    if (bf16) {
      BFloat16BitsOf(in + b, bits + b, e - b);
    } else {
      for (int64_t i = b; i < e; ++i) bits[i] = Float16Bits(in[i]);
    }
  });
}

}  // namespace tern::cpu
