#include "inference/layers/layers.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::inference {

Tensor Upload(const int32_t* values, const Shape& shape, Arena& arena) {
  Tensor t = arena.Alloc(shape, DType::kInt32);
  Copy(Tensor(const_cast<int32_t*>(values), shape, DType::kInt32), t);
  return t;
}

Tensor Upload(const float* values, const Shape& shape, Arena& arena) {
  Tensor t = arena.Alloc(shape);
  Copy(Tensor(const_cast<float*>(values), shape), t);
  return t;
}

Tensor OnHost(const Tensor& t, Arena& host) {
  if (!t.defined() || t.device() == Device::kCpu) return t;
  CHECK(host.device() == Device::kCpu);
  Tensor out = host.Alloc(t.shape(), t.dtype());
  Copy(t, out);
  return out;
}

Tensor StepUploader::Put(const void* values, const Shape& shape, DType dtype, Arena& arena) {
  CHECK(SizeOf(dtype) == 4) << "StepUploader takes int32 or float32 values";
  Tensor t = arena.Alloc(shape, dtype);
  // Nothing to send (every sentence finished: an empty list, whose data() may be null).
  if (t.bytes() == 0) return t;
  if (t.device() == Device::kCpu) {
    std::memcpy(t.raw(), values, t.bytes());
    return t;
  }
  const int64_t words = shape.numel();
  std::memcpy(staging_.Next(words), values, t.bytes());  // once the GPU has read the last ones
  staging_.Send(t.raw(), t.device(), words);
  return t;
}

Positions ParsePositions(const std::string& name) {
  if (name.empty() || name == "marian") return Positions::kMarian;
  if (name == "vaswani") return Positions::kVaswani;
  Fail("model.positions '", name, "' is not known to the runtime (marian or vaswani)");
}

void PositionEncoding(int64_t pos, int64_t d, float* out, Positions style) {
  const int64_t half = d / 2;
  const float log_step =
      std::log(10000.f) / static_cast<float>(style == Positions::kVaswani ? half : half - 1);
  for (int64_t i = 0; i < half; ++i) {
    const float arg = static_cast<float>(pos) * std::exp(-log_step * static_cast<float>(i));
    out[i] = std::sin(arg);
    out[half + i] = std::cos(arg);
  }
}

Tensor LayerNormalize(const Tensor& x, const Tensor& scale, const Tensor& bias, Arena& arena,
                      float eps) {
  Tensor y = arena.Alloc(x.shape());
  Tensor mean = arena.Alloc({x.rows()});
  Tensor rstd = arena.Alloc({x.rows()});
  LayerNorm(x.Flatten2D(), scale, bias, y.Flatten2D(), mean, rstd, eps);
  return y;
}

void AddPositions(const Tensor& x, int64_t start, Arena& arena, Positions style) {
  CHECK_EQ(x.rank(), 3);
  const int64_t t_len = x.dim(1), d = x.dim(2), half = d / 2;
  CHECK(d % 2 == 0 && half > 1) << "model width " << d << " must be even and > 2";
  // Computed on the host; a device gets them copied (once per encoder batch).
  std::vector<float> host(x.device() == Device::kCpu ? 0 : t_len * d);
  Tensor pe = x.device() == Device::kCpu ? arena.Alloc({t_len, d}) : Tensor();
  float* p = x.device() == Device::kCpu ? pe.f32() : host.data();
  for (int64_t t = 0; t < t_len; ++t) PositionEncoding(start + t, d, p + t * d, style);
  if (x.device() != Device::kCpu) pe = Upload(host.data(), {t_len, d}, arena);
  // (B, T*d) += (T*d): the same encodings for every sentence.
  AddBias(x.Reshape({x.dim(0), t_len * d}), pe.Reshape({t_len * d}));
}

Tensor PositionTable(int64_t count, int64_t d, Device device, Positions style) {
  Tensor host = Tensor::Empty({count, d});
  for (int64_t t = 0; t < count; ++t) PositionEncoding(t, d, host.f32() + t * d, style);
  if (device == Device::kCpu) return host;
  Tensor table = Tensor::Empty({count, d}, DType::kFloat32, device);
  Copy(host, table);
  return table;
}

Tensor Embed(const Tensor& table, const Tensor& ids, int64_t start, Arena& arena,
             const Tensor& positions, Positions style) {
  CHECK_EQ(ids.rank(), 2);
  const int64_t d = table.dim(1), t_len = ids.dim(1);
  Tensor out = arena.Alloc({ids.dim(0), t_len, d});
  GatherRows(table, ids.Reshape({ids.numel()}), out.Reshape({ids.numel(), d}),
             std::sqrt(static_cast<float>(d)));
  if (positions.defined() && start + t_len <= positions.dim(0)) {
    // (B, T*d) += (T*d), the values AddPositions computes.
    AddBias(out.Reshape({ids.dim(0), t_len * d}),
            positions.Slice(start, start + t_len).Reshape({t_len * d}));
  } else {
    AddPositions(out, start, arena, style);
  }
  return out;
}

Tensor SplitHeads(const Tensor& x, int heads, Arena& arena) {
  const int64_t b = x.dim(0), t = x.dim(1), dk = x.dim(2) / heads;
  // One position (a decoder step's) or one head: (b, t, h, dk) and (b, h, t, dk) are the same
  // bytes, so a view does, without a copy (or, on a GPU, a launch).
  if (t == 1 || heads == 1) return x.Reshape({b, heads, t, dk});
  Tensor out = arena.Alloc({b, heads, t, dk});
  Permute0213(x.Reshape({b, t, heads, dk}), out);
  return out;
}

// A decoder step's few queries go through Attend, one op; more queries (an encoder's, a whole
// target's) through batched products and a masked softmax on a GPU, where a product beats a pass
// per query. On the CPU every shape goes row by row: a BLAS product would mostly pack its
// operands for such small shapes, and one path keeps a sentence's bits independent of its batch
// (a padded batch only adds masked keys, which AttendRow leaves out exactly).
namespace {
constexpr int64_t kAttendQueries = 8;
}  // namespace

Tensor AttendHeads(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_mask,
                   bool causal, Arena& arena, const int32_t* kv_sentence) {
  const int64_t b = q.dim(0), h = q.dim(1), tq = q.dim(2), dk = q.dim(3), tk = k.dim(2);
  const float scale = 1.f / std::sqrt(static_cast<float>(dk));
  const bool cpu = q.device() == Device::kCpu;
  CHECK(cpu || kv_sentence == nullptr) << "AttendHeads: a sentence map is for the CPU only";
  if (cpu || (tq <= kAttendQueries && dk <= kAttendMaxHeadWidth)) {
    const Tensor rows = kv_sentence ? Tensor(const_cast<int32_t*>(kv_sentence), Shape{b},
                                             DType::kInt32, Device::kCpu)
                                    : Tensor();
    Tensor merged = arena.Alloc({b, tq, h, dk});
    Attend(q, k, v, key_mask, rows, causal, scale, merged);
    return merged.Reshape({b, tq, h * dk});
  }
  Tensor scores = arena.Alloc({b, h, tq, tk});
  Gemm(q.Reshape({b * h, tq, dk}), false, k.Reshape({b * h, tk, dk}), true,
       scores.Reshape({b * h, tq, tk}));
  Softmax(scores, scores, key_mask, causal, scale);
  Tensor context = arena.Alloc({b, h, tq, dk});
  Gemm(scores.Reshape({b * h, tq, tk}), false, v.Reshape({b * h, tk, dk}), false,
       context.Reshape({b * h, tq, dk}));
  if (h == 1) return context.Reshape({b, tq, h * dk});  // as in SplitHeads
  Tensor merged = arena.Alloc({b, tq, h, dk});
  Permute0213(context, merged);
  return merged.Reshape({b, tq, h * dk});
}

Activation ParseActivation(const std::string& name) {
  if (name.empty() || name == "relu") return Activation::kRelu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "swish") return Activation::kSwish;
  Fail("model.ffn_activation '", name, "' is not known to the runtime (relu, gelu or swish)");
}

Tensor FeedForward(const Tensor& x, const FfnParams& p, Activation act, Arena& arena,
                   const Tensor& residual) {
  // The activation in the first product's pass (GemmBias' epilogue on a GPU); swish, which no
  // epilogue has, after it.
  if (act == Activation::kSwish) {
    Tensor hidden = Linear(x, p.w1, p.b1, arena);
    Unary(kSwish, hidden, hidden);
    return Linear(hidden, p.w2, p.b2, arena, residual);
  }
  Tensor hidden = Linear(x, p.w1, p.b1, arena, Tensor(), act == Activation::kGelu ? kGelu : kRelu);
  return Linear(hidden, p.w2, p.b2, arena, residual);
}

}  // namespace tern::inference
