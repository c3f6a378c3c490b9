// Elementwise kernels, bias, row sums and activations (tanh, sigmoid and GELU through the
// vectorizable RationalTanh: within 2e-6 of the library's, several times faster).
#include <cmath>
#include <cstring>

#include "common/thread_pool.h"
#include "tensor/clip_factor.h"
#include "tensor/cpu/cpu_kernels.h"
#include "tensor/cpu/rational_tanh.h"

namespace tern::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;

TERN_MULTIVERSION void AddRange(const float* a, const float* b, float* out, float alpha, float beta,
                                int64_t n) {
  if (beta == 0.f) {
    for (int64_t i = 0; i < n; ++i) out[i] = alpha * a[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = alpha * a[i] + beta * b[i];
  }
}

TERN_MULTIVERSION void MulRange(const float* a, const float* b, float* out, bool acc, int64_t n) {
  if (acc) {
    for (int64_t i = 0; i < n; ++i) out[i] += a[i] * b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
  }
}

TERN_MULTIVERSION void AddBiasRow(float* x, const float* bias, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += bias[i];
}

TERN_MULTIVERSION void AccumulateRow(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += x[i];
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)

TERN_MULTIVERSION void UnaryRange(int op, const float* x, float* y, int64_t n) {
  switch (op) {
    case kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
      break;
    case kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = RationalTanh(x[i]);
      break;
    case kSigmoid:
      for (int64_t i = 0; i < n; ++i) y[i] = RationalSigmoid(x[i]);
      break;
    case kGelu:  // tanh approximation
      for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        y[i] = 0.5f * v * (1.f + RationalTanh(kGeluC * (v + 0.044715f * v * v * v)));
      }
      break;
    case kSwish:  // exact, as torch's SiLU: converted models translate as they did there
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.f + std::exp(-x[i]));
      break;
  }
}

// dx[i] (+)= dy[i] f'(x[i]) for i in [0, n), each value handed to put(i, value).
template <typename Put>
inline void UnaryBackwardLoop(int op, const float* y, const float* dy, int64_t n, Put put) {
  switch (op) {
    case kRelu:
      for (int64_t i = 0; i < n; ++i) put(i, y[i] > 0.f ? dy[i] : 0.f);
      break;
    case kTanh:
      for (int64_t i = 0; i < n; ++i) put(i, dy[i] * (1.f - y[i] * y[i]));
      break;
    case kSigmoid:
      for (int64_t i = 0; i < n; ++i) put(i, dy[i] * y[i] * (1.f - y[i]));
      break;
    case kGelu:  // y holds the input x here
      for (int64_t i = 0; i < n; ++i) {
        float v = y[i], t = RationalTanh(kGeluC * (v + 0.044715f * v * v * v));
        float du = kGeluC * (1.f + 3.f * 0.044715f * v * v);
        put(i, dy[i] * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du));
      }
      break;
    case kSwish:  // y holds the input x here: (x s)' = s (1 + x (1 - s))
      for (int64_t i = 0; i < n; ++i) {
        const float v = y[i], s = 1.f / (1.f + std::exp(-v));
        put(i, dy[i] * s * (1.f + v * (1.f - s)));
      }
      break;
  }
}

TERN_MULTIVERSION void UnaryBackwardRange(int op, const float* y, const float* dy, float* dx,
                                          int64_t n, bool accumulate) {
  if (accumulate)
    UnaryBackwardLoop(op, y, dy, n, [dx](int64_t i, float v) { dx[i] += v; });
  else
    UnaryBackwardLoop(op, y, dy, n, [dx](int64_t i, float v) { dx[i] = v; });
}

}  // namespace

void Fill(const Tensor& x, float value) {
  float* p = x.f32();
  if (value == 0.f) {
    std::memset(p, 0, x.bytes());
    return;
  }
  ParallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = value;
  });
}

void Copy(const Tensor& src, const Tensor& dst) { std::memcpy(dst.raw(), src.raw(), src.bytes()); }

void Add(const Tensor& a, const Tensor& b, const Tensor& out, float alpha, float beta) {
  const float *pa = a.f32(), *pb = b.f32();
  float* po = out.f32();
  ParallelFor(out.numel(), kGrain,
              [&](int64_t s, int64_t e) { AddRange(pa + s, pb + s, po + s, alpha, beta, e - s); });
}

void Mul(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate) {
  const float *pa = a.f32(), *pb = b.f32();
  float* po = out.f32();
  ParallelFor(out.numel(), kGrain,
              [&](int64_t s, int64_t e) { MulRange(pa + s, pb + s, po + s, accumulate, e - s); });
}

void AddBias(const Tensor& x, const Tensor& bias) {
  const int64_t n = x.cols();
  float* px = x.f32();
  const float* pb = bias.f32();
  ParallelFor(x.rows(), GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) AddBiasRow(px + r * n, pb, n);
  });
}

void AddBiasResidual(const Tensor& x, const Tensor& bias, const Tensor& residual) {
  const int64_t n = x.cols();
  float* px = x.f32();
  const float *pb = bias.f32(), *pr = residual.f32();
  ParallelFor(x.rows(), GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      AddBiasRow(px + r * n, pb, n);
      AddBiasRow(px + r * n, pr + r * n, n);  // residual + (x + bias): a + b == b + a exactly
    }
  });
}

void DivideRows(const Tensor& x, const Tensor& divisors) {
  const int64_t n = x.cols();
  float* px = x.f32();
  const float* pd = divisors.f32();
  ParallelFor(x.rows(), GrainRows(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* row = px + r * n;
      for (int64_t i = 0; i < n; ++i) row[i] /= pd[r];
    }
  });
}

void SumRows(const Tensor& x, const Tensor& out, float beta) {
  const int64_t n = x.cols(), rows = x.rows();
  const float* px = x.f32();
  float* po = out.f32();
  if (beta == 0.f)
    std::memset(po, 0, n * sizeof(float));
  else if (beta != 1.f)
    for (int64_t i = 0; i < n; ++i) po[i] *= beta;
  // Parallel over columns so no two threads write the same output.
  ParallelFor(n, 256, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < rows; ++r) AccumulateRow(po + c0, px + r * n + c0, c1 - c0);
  });
}

void Unary(int op, const Tensor& x, const Tensor& out) {
  const float* px = x.f32();
  float* py = out.f32();
  ParallelFor(x.numel(), kGrain / 4,
              [&](int64_t s, int64_t e) { UnaryRange(op, px + s, py + s, e - s); });
}

void UnaryBackward(int op, const Tensor& y, const Tensor& dy, const Tensor& dx, bool accumulate) {
  const float *py = y.f32(), *pdy = dy.f32();
  float* pdx = dx.f32();
  ParallelFor(y.numel(), kGrain, [&](int64_t s, int64_t e) {
    UnaryBackwardRange(op, py + s, pdy + s, pdx + s, e - s, accumulate);
  });
}

void ClipToNorm(const Tensor& x, const Tensor& squared_norm, float clip_norm) {
  const float scale = ClipFactor(squared_norm.f32()[0], clip_norm);
  if (scale == 1.f) return;
  float* p = x.f32();
  ParallelFor(x.numel(), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] *= scale;
  });
}

// Float partial sums of blocks of 4,096 in order, added into a double in block order. Each
// block's sum is one chain of adds (4 cycles each), so eight blocks run side by side: the same
// chains, so the same bits, at eight times the rate.
void SumSquares(const Tensor& x, double* out) {
  constexpr int64_t kBlock = 4096, kSide = 8;
  const float* p = x.f32();
  const int64_t n = x.numel();
  double total = 0;
  int64_t s = 0;
  for (; s + kSide * kBlock <= n; s += kSide * kBlock) {
    float part[kSide] = {};
    for (int64_t i = 0; i < kBlock; ++i) {
      for (int64_t j = 0; j < kSide; ++j) {
        const float v = p[s + j * kBlock + i];
        part[j] += v * v;
      }
    }
    for (int64_t j = 0; j < kSide; ++j) total += part[j];
  }
  for (; s < n; s += kBlock) {
    const int64_t e = std::min(n, s + kBlock);
    float part = 0;
    for (int64_t i = s; i < e; ++i) part += p[i] * p[i];
    total += part;
  }
  *out = total;
}

void SumSquaresTo(const Tensor& x, const Tensor& out) {
  double total = 0;
  SumSquares(x, &total);
  out.f32()[0] = static_cast<float>(total);
}

}  // namespace tern::cpu
