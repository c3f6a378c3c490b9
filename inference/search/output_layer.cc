#include "inference/search/output_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "inference/layers/layers.h"
#include "tensor/cpu/attend_row.h"
#include "tensor/cpu/row_scan.h"
#include "tensor/ops.h"

namespace tern::inference {

float FusedRowTopK(const float* logits, const float* bias, int64_t n, const int32_t excluded[2],
                   int k, bool normalize, std::vector<ColumnScore>* top) {
  top->clear();
  // The biased logits, once (scratch kept between calls), with their maximum, in one vector pass.
  thread_local std::vector<float> biased;
  const float* x = logits;
  if (bias != nullptr) {
    biased.resize(n);
    x = biased.data();
  }
  // The maximum serves only the normalizer: without one and without a bias, no pass for it.
  const float max = bias != nullptr || normalize
                        ? cpu::AddAndMax(logits, bias, bias != nullptr ? biased.data() : nullptr, n)
                        : -std::numeric_limits<float>::infinity();
  // top is kept sorted best first; `floor` is its worst logit once it holds k entries. Once full,
  // the scan jumps to the next column that beats the floor (or is NaN, as the scalar test lets
  // through), so most of a row is passed over a vector at a time.
  float floor = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < n; ++c) {
    if (static_cast<int>(top->size()) == k) {
      c = cpu::FirstNotAtMost(x, c, n, floor);
      if (c == n) break;
    }
    const float v = x[c];
    if (c == excluded[0] || c == excluded[1]) continue;
    if (static_cast<int>(top->size()) == k) top->pop_back();
    auto at = std::upper_bound(top->begin(), top->end(), v,
                               [](float a, const ColumnScore& s) { return a > s.logit; });
    top->insert(at, {v, static_cast<int32_t>(c)});
    if (static_cast<int>(top->size()) == k) floor = top->back().logit;
  }
  if (!normalize) return 0.f;
  if (max == -std::numeric_limits<float>::infinity()) return max;  // log(0)
  // The log-softmax's own sum (cpu::LogSoftmax), vectorized: the unfused path's normalizer.
  return max + std::log(cpu::SumExpShifted(x, n, max));
}

OutputLayer::OutputLayer(const DecoderModel& model)
    : model_(model),
      vocab_(model.vocab_size()),
      table_arena_(model.device()),
      group_arena_(model.device()) {
  Unrestrict();
}

void OutputLayer::Unrestrict() {
  restricted_ = false;
  grouped_ = false;
  excluded_[0] = kPadId;
  excluded_[1] = kBosId;
}

void OutputLayer::Columns(const std::vector<int32_t>& ids, std::vector<int32_t>* columns,
                          int32_t excluded[2]) {
  marks_.assign(vocab_, 0);
  for (int32_t id : ids) {
    CHECK(id >= 0 && id < vocab_) << "Restrict: token " << id << " outside the vocabulary";
    marks_[id] = 1;
  }
  // pad and bos stay as columns, never kept, so that the softmax sums over what the full
  // vocabulary's does whenever the restriction holds every other token.
  marks_[kPadId] = marks_[kBosId] = 1;
  columns->clear();
  for (int64_t v = 0; v < vocab_; ++v) {
    if (!marks_[v]) continue;
    if (v == kPadId) excluded[0] = static_cast<int32_t>(columns->size());
    if (v == kBosId) excluded[1] = static_cast<int32_t>(columns->size());
    columns->push_back(static_cast<int32_t>(v));
  }
  CHECK_GT(columns->size(), 2u) << "Restrict: no producible token";
}

void OutputLayer::Restrict(const std::vector<int32_t>& ids) {
  grouped_ = false;
  Columns(ids, &ids_, excluded_);
  restricted_ = true;
  const int64_t n = static_cast<int64_t>(ids_.size()), d = model_.output_embeddings().dim(1);
  table_arena_.Reset();
  Tensor ids_t = ids_upload_.Put(ids_.data(), {n}, DType::kInt32, table_arena_);
  // The float rows serve a float product and an auto-tuned one's float form; an integer output
  // layer without a tuner reads only its gathered columns (below).
  const LinearWeights* full_integer = model_.integer_output();
  if (full_integer == nullptr || !full_integer->packed || full_integer->tuner) {
    emb_ = table_arena_.Alloc({n, d});
    GatherRows(model_.output_embeddings(), ids_t, emb_);
  } else {
    emb_ = Tensor();
  }
  bias_ = table_arena_.Alloc({n});
  GatherRows(model_.output_bias().Reshape({vocab_, 1}), ids_t, bias_.Reshape({n, 1}));
  restricted_integer_ = LinearWeights();
  if (full_integer == nullptr && model_.packed_output() != nullptr) {
    packed_float_.PackRows(model_.output_embeddings().f32(), d, ids_.data(), n);
  }
  if (const LinearWeights* full = full_integer) {
    full->packed->GatherColumns(ids_, &packed_);
    // A non-owning pointer: packed_ outlives restricted_integer_'s use and is regathered in place.
    restricted_integer_.packed = std::shared_ptr<const cpu::PackedIntMatrix>(
        std::shared_ptr<const cpu::PackedIntMatrix>(), packed_.get());
    if (full->tuner) {
      if (!restricted_tuner_) restricted_tuner_ = std::make_shared<ProductTuner>();
      restricted_integer_.w = emb_;
      restricted_integer_.transposed = true;
      restricted_integer_.tuner = restricted_tuner_;
    }
  }
}

int64_t OutputLayer::columns() const {
  if (!grouped_) return restricted_ ? static_cast<int64_t>(ids_.size()) : vocab_;
  int64_t widest = 0;
  for (const auto& g : groups_) widest = std::max<int64_t>(widest, g->ids.size());
  return widest;
}

int64_t OutputLayer::row_columns(int64_t row) const {
  return grouped_ ? static_cast<int64_t>(GroupOf(row).ids.size()) : columns();
}

const float* OutputLayer::row_bias(int64_t row) const {
  return grouped_ ? GroupOf(row).bias.data() : bias();
}

const int32_t* OutputLayer::row_excluded_columns(int64_t row) const {
  return grouped_ ? GroupOf(row).excluded : excluded_;
}

double OutputLayer::mean_row_columns(int64_t rows) const {
  if (!grouped_ || rows == 0) return static_cast<double>(columns());
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r) sum += static_cast<double>(row_columns(r));
  return sum / static_cast<double>(rows);
}

void OutputLayer::FillGroup(const std::vector<int32_t>& ids, Group* g) {
  Columns(ids, &g->ids, g->excluded);
  const Tensor& table = model_.output_embeddings();
  const int64_t n = static_cast<int64_t>(g->ids.size()), d = table.dim(1);
  const bool on_cpu = model_.device() == Device::kCpu;
  if (!on_cpu && host_bias_.empty()) host_bias_ = model_.output_bias().ToVector();
  const float* full_bias = on_cpu ? model_.output_bias().f32() : host_bias_.data();
  g->bias.resize(n);
  for (int64_t c = 0; c < n; ++c) g->bias[c] = full_bias[g->ids[c]];
  device_groups_stale_ = true;
  if (!on_cpu) return;  // the rows are gathered on the device (GatherGroupsOnDevice)
  if (model_.integer_output() == nullptr && model_.packed_output() != nullptr) {
    g->packed_float.PackRows(table.f32(), d, g->ids.data(), n);
    return;
  }
  g->emb.resize(n * d);
  for (int64_t c = 0; c < n; ++c) {
    std::memcpy(g->emb.data() + c * d, table.f32() + g->ids[c] * d, d * sizeof(float));
  }
  if (const LinearWeights* full = model_.integer_output()) {
    full->packed->GatherColumns(g->ids, &g->packed);
  }
}

void OutputLayer::RestrictGroups(const std::vector<std::vector<int32_t>>& ids, int rows_per_group) {
  CHECK_GT(rows_per_group, 0);
  restricted_ = false;
  grouped_ = true;
  rows_per_group_ = rows_per_group;
  for (auto& g : groups_) spare_groups_.push_back(std::move(g));
  groups_.clear();
  AddGroups(ids);
}

void OutputLayer::KeepGroups(const std::vector<int32_t>& keep) {
  CHECK(grouped_) << "KeepGroups without RestrictGroups";
  std::vector<std::unique_ptr<Group>> kept;
  for (int32_t i : keep) {
    CHECK(i >= 0 && i < static_cast<int32_t>(groups_.size()) && groups_[i] != nullptr)
        << "KeepGroups: bad or repeated group " << i;
    kept.push_back(std::move(groups_[i]));
  }
  for (auto& g : groups_) {
    if (g) spare_groups_.push_back(std::move(g));
  }
  groups_ = std::move(kept);
  device_groups_stale_ = true;
}

void OutputLayer::AddGroups(const std::vector<std::vector<int32_t>>& ids) {
  CHECK(grouped_) << "AddGroups without RestrictGroups";
  for (const std::vector<int32_t>& group_ids : ids) {
    std::unique_ptr<Group> g;
    if (spare_groups_.empty()) {
      g = std::make_unique<Group>();
    } else {
      g = std::move(spare_groups_.back());
      spare_groups_.pop_back();
    }
    FillGroup(group_ids, g.get());
    groups_.push_back(std::move(g));
  }
}

Tensor OutputLayer::GroupedLogits(const Tensor& x2, bool with_bias, Arena& arena) const {
  const int64_t rows = x2.rows(), d = x2.cols(), width = columns();
  CHECK_LE(rows, static_cast<int64_t>(groups_.size()) * rows_per_group_)
      << "more rows than the restricted groups hold";
  Tensor logits = arena.Alloc({rows, width});
  float* out = logits.f32();
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_group_) {
    const int64_t m = std::min<int64_t>(rows_per_group_, rows - r0);
    const Group& g = GroupOf(r0);
    const int64_t n = static_cast<int64_t>(g.ids.size());
    const float* bias = with_bias ? g.bias.data() : nullptr;
    if (g.packed) {
      cpu::IntGemm(x2.f32() + r0 * d, m, *g.packed, bias, out + r0 * width, width);
    } else if (g.packed_float.n() > 0) {
      cpu::FloatEpilogue e;
      e.bias = bias;
      cpu::FloatGemm(x2.f32() + r0 * d, m, d, g.packed_float, e, out + r0 * width, width);
    } else {
      Tensor part = arena.Alloc({m, n});
      Gemm(Tensor(const_cast<float*>(x2.f32()) + r0 * d, Shape{m, d}), false,
           Tensor(const_cast<float*>(g.emb.data()), Shape{n, d}), true, part);
      for (int64_t i = 0; i < m; ++i) {
        float* dst = out + (r0 + i) * width;
        const float* src = part.f32() + i * n;
        for (int64_t c = 0; c < n; ++c) dst[c] = src[c] + (bias ? bias[c] : 0.f);
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      std::fill(out + (r0 + i) * width + n, out + (r0 + i + 1) * width,
                -std::numeric_limits<float>::infinity());
    }
  }
  return logits;
}

void OutputLayer::GatherGroupsOnDevice() {
  const int64_t groups = static_cast<int64_t>(groups_.size()), width = columns();
  const int64_t d = model_.output_embeddings().dim(1);
  std::vector<int32_t> ids(groups * width, kPadId);
  std::vector<float> init(groups * rows_per_group_ * width, kGroupPadding);
  for (int64_t g = 0; g < groups; ++g) {
    const Group& group = *groups_[g];
    std::copy(group.ids.begin(), group.ids.end(), ids.begin() + g * width);
    for (int64_t i = 0; i < rows_per_group_; ++i) {
      std::copy(group.bias.begin(), group.bias.end(),
                init.begin() + (g * rows_per_group_ + i) * width);
    }
  }
  group_arena_.Reset();
  const Tensor ids_t =
      group_ids_upload_.Put(ids.data(), {groups * width}, DType::kInt32, group_arena_);
  group_emb_ = group_arena_.Alloc({groups * width, d});
  GatherRows(model_.output_embeddings(), ids_t, group_emb_);
  group_emb_ = group_emb_.Reshape({groups, width, d});
  group_init_ = group_init_upload_.Put(init.data(), {groups * rows_per_group_, width},
                                       DType::kFloat32, group_arena_);
  device_groups_stale_ = false;
}

Tensor OutputLayer::DeviceGroupedLogits(const Tensor& x2, Arena& arena) {
  if (device_groups_stale_) GatherGroupsOnDevice();
  const int64_t rows = x2.rows(), d = x2.cols(), width = group_emb_.dim(1);
  CHECK(rows % rows_per_group_ == 0 && rows <= group_init_.dim(0))
      << "grouped logits on a GPU take whole groups: " << rows << " rows, " << rows_per_group_
      << " a group, " << groups_.size() << " groups";
  const int64_t groups = rows / rows_per_group_;
  // The biases (and padding) first, then each group's rows times its own table added to them:
  // one batched product.
  Tensor logits = arena.Alloc({groups, rows_per_group_, width});
  Copy(group_init_.Slice(0, rows).Reshape(logits.shape()), logits);
  Gemm(x2.Reshape({groups, rows_per_group_, d}), false, group_emb_.Slice(0, groups), true, logits,
       1.f, 1.f, model_.product_inputs());
  return logits.Reshape({rows, width});
}

Tensor OutputLayer::Logits(const Tensor& x, bool with_bias, Arena& arena) {
  const Tensor x2 = x.Flatten2D();
  if (grouped_ && model_.device() != Device::kCpu) {
    CHECK(with_bias) << "grouped logits on a GPU come with their biases";
    return DeviceGroupedLogits(x2, arena);
  }
  if (grouped_) return GroupedLogits(x2, with_bias, arena);
  const Tensor& table = restricted_ ? emb_ : model_.output_table();
  Tensor logits = arena.Alloc({x2.rows(), columns()});
  const LinearWeights* integer = restricted_ ? &restricted_integer_ : model_.integer_output();
  if (integer != nullptr && integer->packed) {
    LinearInto(x2, *integer, with_bias ? (restricted_ ? bias_ : model_.output_bias()) : Tensor(),
               logits);
    return logits;
  }
  if (const cpu::PackedFloatMatrix* full = model_.packed_output()) {
    cpu::FloatEpilogue e;
    e.bias = with_bias ? (restricted_ ? bias_ : model_.output_bias()).f32() : nullptr;
    cpu::FloatGemm(x2.f32(), x2.rows(), x2.cols(), restricted_ ? packed_float_ : *full, e,
                   logits.f32(), columns());
    return logits;
  }
  if (with_bias) {
    GemmBias(x2, false, table, true, restricted_ ? bias_ : model_.output_bias(), logits,
             model_.product_inputs());
  } else {
    Gemm(x2, false, table, true, logits, 1.f, 0.f, model_.product_inputs());
  }
  return logits;
}

}  // namespace tern::inference
