// The float GEMM's packing, dispatch and reference; the kernels are in float_gemm_<isa>.cc.
#include "tensor/cpu/float_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/cpu/float_gemm_kernel.h"

namespace tern::cpu {
namespace {

using float_gemm_internal::KernelArgs;
using KernelFn = void (*)(const KernelArgs&);

// Products smaller than this (multiply-adds) run on the calling thread.
constexpr double kParallelMacs = 1 << 20;

bool CpuHasFloatIsa(IntGemmIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case IntGemmIsa::kSse2:
      return false;
    case IntGemmIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case IntGemmIsa::kAvx512bw:
    case IntGemmIsa::kAvx512vnni:
      return __builtin_cpu_supports("avx512f");
  }
  return false;
}

KernelFn KernelFor(IntGemmIsa isa) {
  switch (isa) {
    case IntGemmIsa::kAvx2:
      return float_gemm_internal::KernelAvx2;
    case IntGemmIsa::kAvx512bw:
    case IntGemmIsa::kAvx512vnni:
      return float_gemm_internal::KernelAvx512;
    case IntGemmIsa::kSse2:
      break;
  }
  return nullptr;
}

}  // namespace

PackedFloatMatrix::PackedFloatMatrix(const float* w, int64_t k, int64_t n, bool transposed) {
  Reserve(k, n);
  for (int64_t p = 0; p < panels(); ++p) {
    float* panel = data_ + p * k * kPanel;
    const int64_t cols = std::min(kPanel, n - p * kPanel);
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t col = p * kPanel + j;
        panel[kk * kPanel + j] = transposed ? w[col * k + kk] : w[kk * n + col];
      }
    }
  }
}

PackedFloatMatrix::~PackedFloatMatrix() { std::free(data_); }

void PackedFloatMatrix::Reserve(int64_t k, int64_t n) {
  k_ = k;
  n_ = n;
  const size_t floats = static_cast<size_t>(panels() * k * kPanel);
  if (floats > capacity_) {
    std::free(data_);
    // aligned_alloc wants a multiple of the alignment; at least one cache line.
    const size_t bytes = std::max<size_t>(64, (floats * sizeof(float) + 63) / 64 * 64);
    data_ = static_cast<float*>(std::aligned_alloc(64, bytes));
    CHECK(data_ != nullptr) << "cannot allocate " << bytes << " bytes for a packed matrix";
    capacity_ = floats;
  }
  std::memset(data_, 0, floats * sizeof(float));
}

void PackedFloatMatrix::PackRows(const float* table, int64_t k, const int32_t* rows, int64_t n) {
  Reserve(k, n);
  for (int64_t p = 0; p < panels(); ++p) {
    float* panel = data_ + p * k * kPanel;
    const int64_t cols = std::min(kPanel, n - p * kPanel);
    for (int64_t j = 0; j < cols; ++j) {
      const float* src = table + static_cast<int64_t>(rows[p * kPanel + j]) * k;
      for (int64_t kk = 0; kk < k; ++kk) panel[kk * kPanel + j] = src[kk];
    }
  }
}

std::vector<IntGemmIsa> SupportedFloatGemmIsas() {
  std::vector<IntGemmIsa> out;
  for (IntGemmIsa isa : {IntGemmIsa::kAvx2, IntGemmIsa::kAvx512bw}) {
    if (CpuHasFloatIsa(isa)) out.push_back(isa);
  }
  return out;
}

bool HasFloatGemmKernel() {
  static const bool has = CpuHasFloatIsa(ActiveIntGemmIsa());
  return has;
}

void FloatGemmWithIsa(IntGemmIsa isa, const float* a, int64_t m, int64_t lda,
                      const PackedFloatMatrix& b, const FloatEpilogue& epilogue, float* c,
                      int64_t ldc) {
  CHECK(CpuHasFloatIsa(isa)) << "no float GEMM kernel for " << IntGemmIsaName(isa) << " here";
  if (m == 0 || b.n() == 0) return;
  KernelArgs g;
  g.a = a;
  g.lda = lda;
  g.b = b.data();
  g.k = b.k();
  g.epilogue = epilogue;
  g.c = c;
  g.ldc = ldc;
  g.n = b.n();
  g.row_begin = 0;
  g.row_end = m;
  g.panel_begin = 0;
  g.panel_end = b.panels();
  const KernelFn kernel = KernelFor(isa);
  const int threads = NumThreads();
  const double macs = static_cast<double>(m) * b.n() * b.k();
  if (threads == 1 || macs < kParallelMacs) {
    kernel(g);
    return;
  }
  // Columns (in pairs of panels) when there are enough for every thread, else rows.
  const int64_t pairs = (b.panels() + 1) / 2;
  if (pairs >= 2 * threads || m < 16) {
    ParallelFor(pairs, 1, [&](int64_t p0, int64_t p1) {
      KernelArgs part = g;
      part.panel_begin = 2 * p0;
      part.panel_end = std::min(2 * p1, b.panels());
      kernel(part);
    });
  } else {
    const int64_t tiles = (m + 7) / 8;  // whole tiles of 8 rows per thread
    ParallelFor(tiles, 1, [&](int64_t t0, int64_t t1) {
      KernelArgs part = g;
      part.row_begin = 8 * t0;
      part.row_end = std::min(8 * t1, m);
      kernel(part);
    });
  }
}

void FloatGemm(const float* a, int64_t m, int64_t lda, const PackedFloatMatrix& b,
               const FloatEpilogue& epilogue, float* c, int64_t ldc) {
  FloatGemmWithIsa(ActiveIntGemmIsa(), a, m, lda, b, epilogue, c, ldc);
}

void FloatGemmReference(const float* a, int64_t m, int64_t lda, const PackedFloatMatrix& b,
                        const FloatEpilogue& epilogue, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < b.n(); ++j) {
      float acc = 0.f;
      for (int64_t kk = 0; kk < b.k(); ++kk) acc = std::fma(a[i * lda + kk], b.At(kk, j), acc);
      c[i * ldc + j] = float_gemm_internal::Finish(acc, epilogue, i, j);
    }
  }
}

}  // namespace tern::cpu
