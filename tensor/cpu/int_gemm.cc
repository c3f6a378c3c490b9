// Quantization, packing, ISA dispatch and the scalar reference of the integer GEMM (int_gemm.h).
// The kernels themselves live in int_gemm_<isa>.cc.
#include "tensor/cpu/int_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/thread_pool.h"
#include "tensor/cpu/int_gemm_kernel.h"

namespace tern::cpu {
namespace int_gemm_internal {

double ReduceLanes(const double* l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

int64_t ListNonZeroGroupsScalar(const uint8_t* cells, int64_t rows, int64_t row_bytes,
                                int64_t groups, int32_t* list, int32_t first) {
  int64_t count = 0;
  for (int64_t k = 0; k < groups; ++k) {
    uint32_t any = 0;
    for (int64_t r = 0; r < rows; ++r) {
      uint32_t cell;
      std::memcpy(&cell, cells + r * row_bytes + k * kCellBytes, kCellBytes);
      any |= cell;
    }
    if (any != 0) list[count++] = first + static_cast<int32_t>(k);
  }
  return count;
}

RowStats RowStatsScalar(const float* x, int64_t k) {
  RowStats s{0.f, 0.0};
  double lanes[kSumLanes] = {};
  for (int64_t i = 0; i < k; ++i) {
    const float a = std::fabs(x[i]);
    s.max_abs = std::max(s.max_abs, a);  // NaN is ignored
    lanes[i % kSumLanes] += a;
  }
  s.sum_abs = ReduceLanes(lanes);
  return s;
}

void QuantizeValuesScalar(bool int16, const float* x, int64_t k, float scale, void* q) {
  const float r = int16 ? 32767.f : 127.f;
  for (int64_t i = 0; i < k; ++i) {
    float v = std::nearbyint(x[i] * scale);
    v = v != v ? 0.f : std::clamp(v, -r, r);  // NaN to 0
    if (int16) {
      static_cast<int16_t*>(q)[i] = static_cast<int16_t>(v);
    } else {
      static_cast<int8_t*>(q)[i] = static_cast<int8_t>(v);
    }
  }
}

}  // namespace int_gemm_internal

namespace {

using int_gemm_internal::kCellBytes;
using int_gemm_internal::KernelArgs;
using int_gemm_internal::kListedRows;
using int_gemm_internal::kPanelCols;
using int_gemm_internal::kPanelRowBytes;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Products above this many multiply-adds are split over the thread pool by panels.
constexpr double kParallelMacs = 1 << 20;

int ValuesPerCell(IntType type) { return type == IntType::kInt16 ? 2 : 4; }

bool HasAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}

// Quantizes one row x (k) into cells (groups * 4 bytes, zero padded); returns the row's scale.
// int8: max|x| maps to 127. int16: as many bits as the row allows: |q| <= 32767, and
// sum_k |q_k| * weight_range < 2^31, which bounds every partial sum of the int32 accumulation
// whatever the weights (rounding adds at most k / 2 to sum |q|). For a row that is not all peaks
// that is a few bits more than k * max|q| * weight_range < 2^31 would give. `vectorized` picks the
// AVX2 passes, which give the same bits as the scalar ones (int_gemm_kernel.h).
float QuantizeRow(IntType type, const float* x, int64_t k, int32_t weight_range, int64_t groups,
                  uint8_t* cells, bool vectorized) {
  namespace ig = int_gemm_internal;
  // int8 needs only the largest magnitude; int16 its budget's sum too.
  const ig::RowStats stats =
      type == IntType::kInt16
          ? (vectorized ? ig::RowStatsAvx2(x, k) : ig::RowStatsScalar(x, k))
          : ig::RowStats{vectorized ? ig::MaxAbsAvx2(x, k) : ig::RowStatsScalar(x, k).max_abs, 0.0};
  const int32_t range = type == IntType::kInt16 ? 32767 : 127;
  float scale = 1.f;
  if (stats.max_abs > 0.f && stats.max_abs < std::numeric_limits<float>::infinity()) {
    scale = static_cast<float>(range) / stats.max_abs;
    if (type == IntType::kInt16) {
      const double budget = static_cast<double>(kInt32Max) / weight_range - 0.5 * k - 1.0;
      // Rounded down a little so float rounding of the scale cannot take the sum over.
      scale = std::min(scale, static_cast<float>(budget / stats.sum_abs * (1.0 - 1e-6)));
    }
  }
  const bool int16 = type == IntType::kInt16;
  const int64_t used = k * (int16 ? 2 : 1);
  std::memset(cells + used, 0, groups * kCellBytes - used);
  if (vectorized) {
    ig::QuantizeValuesAvx2(int16, x, k, scale, cells);
  } else {
    ig::QuantizeValuesScalar(int16, x, k, scale, cells);
  }
  return scale;
}

// Quantized A and per-row factors for one product; thread-local so that the decoding loop does
// not allocate after its first steps.
struct QuantizedRows {
  std::vector<uint8_t> cells;
  std::vector<float> unquant;
};

const QuantizedRows& QuantizeA(const float* a, int64_t m, const PackedIntMatrix& b) {
  thread_local QuantizedRows rows;
  const int64_t row_bytes = b.groups() * kCellBytes;
  if (rows.cells.size() < static_cast<size_t>(m * row_bytes)) rows.cells.resize(m * row_bytes);
  if (rows.unquant.size() < static_cast<size_t>(m)) rows.unquant.resize(m);
  const int32_t weight_range = WeightQuantRange(b.type(), b.k());
  for (int64_t i = 0; i < m; ++i) {
    const float scale = QuantizeRow(b.type(), a + i * b.k(), b.k(), weight_range, b.groups(),
                                    rows.cells.data() + i * row_bytes, HasAvx2());
    rows.unquant[i] = 1.f / (scale * b.scale());
  }
  return rows;
}

// Per tile of kListedRows rows, the k-groups with a non-zero cell (KernelArgs::listed);
// thread-local like QuantizedRows.
struct ListedGroups {
  std::vector<int32_t> list;
  std::vector<int64_t> begin;
};

// Lists the groups of quantized A's tiles; null when they would skip too little to beat the
// dense kernel, whose larger tiles run faster: more than 3/4 of all groups listed.
const ListedGroups* ListGroups(const QuantizedRows& rows, int64_t m, int64_t groups) {
  thread_local ListedGroups l;
  const int64_t tiles = (m + kListedRows - 1) / kListedRows, row_bytes = groups * kCellBytes;
  if (l.list.size() < static_cast<size_t>(tiles * groups)) l.list.resize(tiles * groups);
  l.begin.resize(tiles + 1);
  int64_t total = 0;
  for (int64_t t = 0; t < tiles; ++t) {
    l.begin[t] = total;
    const uint8_t* cells = rows.cells.data() + t * kListedRows * row_bytes;
    const int64_t n = std::min<int64_t>(kListedRows, m - t * kListedRows);
    int32_t* list = l.list.data() + total;
    total += HasAvx2()
                 ? int_gemm_internal::ListNonZeroGroupsAvx2(cells, n, row_bytes, groups, list)
                 : int_gemm_internal::ListNonZeroGroupsScalar(cells, n, row_bytes, groups, list);
  }
  l.begin[tiles] = total;
  return 4 * total <= 3 * tiles * groups ? &l : nullptr;
}

using KernelFn = void (*)(const KernelArgs&);

KernelFn KernelFor(IntGemmIsa isa, IntType type) {
  namespace k = int_gemm_internal;
  const bool i16 = type == IntType::kInt16;
  switch (isa) {
    case IntGemmIsa::kSse2:
      return i16 ? k::KernelSse2Int16 : k::KernelSse2Int8;
    case IntGemmIsa::kAvx2:
      return i16 ? k::KernelAvx2Int16 : k::KernelAvx2Int8;
    case IntGemmIsa::kAvx512bw:
      return i16 ? k::KernelAvx512bwInt16 : k::KernelAvx512bwInt8;
    case IntGemmIsa::kAvx512vnni:
      return i16 ? k::KernelAvx512vnniInt16 : k::KernelAvx512vnniInt8;
  }
  return nullptr;
}

bool CpuHas(IntGemmIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case IntGemmIsa::kSse2:
      return true;
    case IntGemmIsa::kAvx2:
      return __builtin_cpu_supports("avx2");
    case IntGemmIsa::kAvx512bw:
      return __builtin_cpu_supports("avx512bw");
    case IntGemmIsa::kAvx512vnni:
      return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

}  // namespace

IntGemmIsa ParseIntGemmIsa(const std::string& want) {
  const std::vector<IntGemmIsa> supported = SupportedIntGemmIsas();
  auto has = [&](IntGemmIsa isa) {
    return std::find(supported.begin(), supported.end(), isa) != supported.end();
  };
  if (want == "avx512") {
    if (has(IntGemmIsa::kAvx512vnni)) return IntGemmIsa::kAvx512vnni;
    if (has(IntGemmIsa::kAvx512bw)) return IntGemmIsa::kAvx512bw;
    Fail("TERN_ISA=avx512: this CPU has no AVX-512BW (best here: ",
         IntGemmIsaName(supported.back()), ")");
  }
  for (IntGemmIsa isa :
       {IntGemmIsa::kSse2, IntGemmIsa::kAvx2, IntGemmIsa::kAvx512bw, IntGemmIsa::kAvx512vnni}) {
    if (want == IntGemmIsaName(isa)) {
      if (has(isa)) return isa;
      Fail("TERN_ISA=", want,
           ": this CPU does not support it (best here: ", IntGemmIsaName(supported.back()), ")");
    }
  }
  Fail("TERN_ISA=", want, " is not known (sse2, avx2, avx512, avx512bw or avx512vnni)");
}

const char* IntTypeName(IntType type) { return type == IntType::kInt16 ? "int16" : "int8"; }

const char* IntGemmIsaName(IntGemmIsa isa) {
  switch (isa) {
    case IntGemmIsa::kSse2:
      return "sse2";
    case IntGemmIsa::kAvx2:
      return "avx2";
    case IntGemmIsa::kAvx512bw:
      return "avx512bw";
    case IntGemmIsa::kAvx512vnni:
      return "avx512vnni";
  }
  return "unknown";
}

std::vector<IntGemmIsa> SupportedIntGemmIsas() {
  std::vector<IntGemmIsa> out;
  for (IntGemmIsa isa :
       {IntGemmIsa::kSse2, IntGemmIsa::kAvx2, IntGemmIsa::kAvx512bw, IntGemmIsa::kAvx512vnni}) {
    if (CpuHas(isa)) out.push_back(isa);
  }
  return out;
}

IntGemmIsa ActiveIntGemmIsa() {
  static const IntGemmIsa isa = [] {
    const char* env = std::getenv("TERN_ISA");
    return env == nullptr || *env == '\0' ? SupportedIntGemmIsas().back() : ParseIntGemmIsa(env);
  }();
  return isa;
}

int32_t WeightQuantRange(IntType type, int64_t k) {
  if (type == IntType::kInt8) return 127;
  const int64_t terms = std::max<int64_t>(k, 1);
  int64_t r = static_cast<int64_t>(std::sqrt(static_cast<double>(kInt32Max) / terms));
  while (r * r * terms > kInt32Max) --r;  // guard the square root's rounding
  return static_cast<int32_t>(std::min<int64_t>(r, 32767));
}

float WeightQuantScale(IntType type, int64_t k, float max_abs) {
  if (!(max_abs > 0.f) || !std::isfinite(max_abs)) return 1.f;
  return static_cast<float>(WeightQuantRange(type, k)) / max_abs;
}

void QuantizeWeights(IntType type, const float* w, int64_t count, float scale, void* out) {
  int_gemm_internal::QuantizeValuesScalar(type == IntType::kInt16, w, count, scale, out);
}

float QuantizeWeightMatrix(IntType type, const float* w, int64_t k, int64_t count, void* out) {
  float max_abs = 0.f;
  for (int64_t i = 0; i < count; ++i) max_abs = std::max(max_abs, std::fabs(w[i]));
  const float scale = WeightQuantScale(type, k, max_abs);
  QuantizeWeights(type, w, count, scale, out);
  return scale;
}

PackedIntMatrix::PackedIntMatrix(IntType type, int64_t k, int64_t n, float scale)
    : type_(type), k_(k), n_(n), scale_(scale) {
  CHECK(k >= 0 && n >= 0 && scale > 0.f) << "PackedIntMatrix: bad shape or scale";
  const int per_cell = ValuesPerCell(type);
  groups_ = (k + per_cell - 1) / per_cell;
  panels_ = (n + kPanelCols - 1) / kPanelCols;
  const size_t bytes = std::max<size_t>(panels_ * groups_ * kPanelRowBytes, kPanelRowBytes);
  data_ = static_cast<uint8_t*>(std::aligned_alloc(64, bytes));
  CHECK(data_ != nullptr) << "PackedIntMatrix: out of memory (" << bytes << " bytes)";
  capacity_ = bytes;
  std::memset(data_, 0, bytes);
  if (type == IntType::kInt8) shift_offsets_.assign(panels_ * kPanelCols, 0);
}

void QuantizeWeightColumns(IntType type, const float* w, int64_t k, int64_t n, bool transposed,
                           void* out, float* scales) {
  const int64_t column_stride = transposed ? k : 1, row_stride = transposed ? 1 : n;
  const int value_bytes = type == IntType::kInt16 ? 2 : 1;
  for (int64_t j = 0; j < n; ++j) {
    float max_abs = 0.f;
    for (int64_t kk = 0; kk < k; ++kk) {
      max_abs = std::max(max_abs, std::fabs(w[j * column_stride + kk * row_stride]));
    }
    scales[j] = WeightQuantScale(type, k, max_abs);
    for (int64_t kk = 0; kk < k; ++kk) {
      const int64_t at = j * column_stride + kk * row_stride;
      QuantizeWeights(type, w + at, 1, scales[j], static_cast<char*>(out) + at * value_bytes);
    }
  }
}

PackedIntMatrix::PackedIntMatrix(IntType type, const void* q, int64_t k, int64_t n, float scale,
                                 bool transposed, const float* column_scales)
    : PackedIntMatrix(type, k, n, scale) {
  if (column_scales != nullptr) {
    column_unquant_.resize(n);
    for (int64_t j = 0; j < n; ++j) {
      CHECK(column_scales[j] > 0.f && std::isfinite(column_scales[j]))
          << "PackedIntMatrix: column scale " << column_scales[j];
      column_unquant_[j] = 1.f / column_scales[j];
    }
  }
  const int per_cell = ValuesPerCell(type);
  const int value_bytes = type == IntType::kInt16 ? 2 : 1;
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t nn = 0; nn < n; ++nn) {
      const int64_t src = transposed ? nn * k + kk : kk * n + nn;
      const int64_t cell =
          ((nn / kPanelCols) * groups_ + kk / per_cell) * kPanelCols + nn % kPanelCols;
      uint8_t* dst = data_ + cell * kCellBytes + (kk % per_cell) * value_bytes;
      if (type == IntType::kInt16) {
        std::memcpy(dst, static_cast<const int16_t*>(q) + src, 2);
      } else {
        const int8_t v = static_cast<const int8_t*>(q)[src];
        std::memcpy(dst, &v, 1);
        shift_offsets_[nn] -= 128 * v;
      }
    }
  }
}

void PackedIntMatrix::GatherColumns(const std::vector<int32_t>& columns,
                                    std::unique_ptr<PackedIntMatrix>* out) const {
  const int64_t n = static_cast<int64_t>(columns.size());
  const int64_t panels = (n + kPanelCols - 1) / kPanelCols;
  const size_t bytes = std::max<size_t>(panels * groups_ * kPanelRowBytes, kPanelRowBytes);
  PackedIntMatrix* o = out->get();
  if (o == nullptr || o->capacity_ < bytes) {
    out->reset(new PackedIntMatrix(type_, k_, n, scale_));
    o = out->get();
  } else {
    o->type_ = type_;
    o->k_ = k_;
    o->n_ = n;
    o->scale_ = scale_;
    o->groups_ = groups_;
    o->panels_ = panels;
    std::memset(o->data_, 0, bytes);  // the last panel's unused columns must be zeros
    if (type_ == IntType::kInt8) o->shift_offsets_.assign(panels * kPanelCols, 0);
  }
  o->column_unquant_.resize(column_unquant_.empty() ? 0 : n);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t c = columns[j];
    CHECK(c >= 0 && c < n_) << "GatherColumns: column " << c << " outside 0.." << n_ - 1;
    const uint8_t* src =
        data_ + ((c / kPanelCols) * groups_ * kPanelCols + c % kPanelCols) * kCellBytes;
    uint8_t* dst =
        o->data_ + ((j / kPanelCols) * groups_ * kPanelCols + j % kPanelCols) * kCellBytes;
    for (int64_t g = 0; g < groups_; ++g) {
      std::memcpy(dst + g * kPanelRowBytes, src + g * kPanelRowBytes, kCellBytes);
    }
    if (type_ == IntType::kInt8) o->shift_offsets_[j] = shift_offsets_[c];
    if (!column_unquant_.empty()) o->column_unquant_[j] = column_unquant_[c];
  }
}

std::unique_ptr<PackedIntMatrix> PackedIntMatrix::FromFloat(IntType type, const float* w, int64_t k,
                                                            int64_t n, bool transposed) {
  std::vector<int16_t> q(k * n);  // int8 values use the first half of the bytes
  std::vector<float> scales(n);
  QuantizeWeightColumns(type, w, k, n, transposed, q.data(), scales.data());
  return std::make_unique<PackedIntMatrix>(type, q.data(), k, n, 1.f, transposed, scales.data());
}

PackedIntMatrix::~PackedIntMatrix() { std::free(data_); }

int32_t PackedIntMatrix::At(int64_t kk, int64_t nn) const {
  const int per_cell = ValuesPerCell(type_);
  const int64_t cell = ((nn / kPanelCols) * groups_ + kk / per_cell) * kPanelCols + nn % kPanelCols;
  const uint8_t* p = data_ + cell * kCellBytes;
  if (type_ == IntType::kInt16) {
    int16_t v;
    std::memcpy(&v, p + (kk % per_cell) * 2, 2);
    return v;
  }
  return static_cast<int8_t>(p[kk % per_cell]);
}

void IntGemmWithIsa(IntGemmIsa isa, const float* a, int64_t m, const PackedIntMatrix& b,
                    const float* bias, float* c, int64_t ldc, bool skip_zero_groups) {
  if (m == 0 || b.n() == 0) return;
  const QuantizedRows& rows = QuantizeA(a, m, b);
  KernelArgs g;
  g.a = rows.cells.data();
  g.m = m;
  g.row_unquant = rows.unquant.data();
  g.column_unquant = b.column_unquant();
  g.b = b.data();
  g.groups = b.groups();
  g.col_offsets =
      isa == IntGemmIsa::kAvx512vnni && b.type() == IntType::kInt8 ? b.shift_offsets() : nullptr;
  g.bias = bias;
  g.c = c;
  g.ldc = ldc;
  g.n = b.n();
  g.panel_begin = 0;
  g.panel_end = b.panels();
  // The shifted int8 of VNNI adds 128 * B over every group in col_offsets: no group may be skipped.
  if (skip_zero_groups && g.col_offsets == nullptr) {
    if (const ListedGroups* listed = ListGroups(rows, m, b.groups())) {
      g.listed = listed->list.data();
      g.listed_begin = listed->begin.data();
    }
  }
  const KernelFn kernel = KernelFor(isa, b.type());
  const double macs = static_cast<double>(m) * b.n() * b.k();
  if (NumThreads() == 1 || macs < kParallelMacs) {
    kernel(g);
    return;
  }
  // Chunks of 4 panels (64 columns), so each thread's blocks are whole for every kernel.
  const int64_t blocks = (b.panels() + 3) / 4;
  ParallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    KernelArgs part = g;
    part.panel_begin = b0 * 4;
    part.panel_end = std::min(b1 * 4, b.panels());
    kernel(part);
  });
}

void IntGemm(const float* a, int64_t m, const PackedIntMatrix& b, const float* bias, float* c,
             int64_t ldc, bool skip_zero_groups) {
  IntGemmWithIsa(ActiveIntGemmIsa(), a, m, b, bias, c, ldc, skip_zero_groups);
}

void IntGemmReference(const float* a, int64_t m, const PackedIntMatrix& b, const float* bias,
                      float* c, int64_t ldc) {
  const int64_t k = b.k();
  const int32_t weight_range = WeightQuantRange(b.type(), k);
  std::vector<uint8_t> cells(b.groups() * kCellBytes);
  for (int64_t i = 0; i < m; ++i) {
    const float scale = QuantizeRow(b.type(), a + i * k, k, weight_range, b.groups(), cells.data(),
                                    /*vectorized=*/false);
    const float unquant = 1.f / (scale * b.scale());
    for (int64_t j = 0; j < b.n(); ++j) {
      int64_t acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        int32_t q;
        if (b.type() == IntType::kInt16) {
          int16_t v;
          std::memcpy(&v, cells.data() + kk * 2, 2);
          q = v;
        } else {
          q = static_cast<int8_t>(cells[kk]);
        }
        acc += static_cast<int64_t>(q) * b.At(kk, j);
      }
      CHECK(acc >= -kInt32Max && acc <= kInt32Max) << "int32 accumulation would overflow";
      float f = static_cast<float>(static_cast<int32_t>(acc)) * unquant;
      if (b.column_unquant()) f = f * b.column_unquant()[j];
      c[i * ldc + j] = f + (bias ? bias[j] : 0.f);
    }
  }
}

}  // namespace tern::cpu
