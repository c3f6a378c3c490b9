#include "inference/tables/clustering.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>

#include "common/error.h"
#include "inference/format/special_ids.h"
#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern::inference {
namespace {

Tensor Owned(const std::vector<float>& v, const Shape& shape) {
  Tensor t = Tensor::Empty(shape);
  std::memcpy(t.raw(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor OwnedInts(const std::vector<int32_t>& v) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(v.size())}, DType::kInt32);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

}  // namespace

std::vector<float> KMeans(const std::vector<float>& states, int64_t n, int64_t d, int k,
                          int iterations, uint32_t seed, std::vector<int32_t>* assignment) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<float> centroids(static_cast<size_t>(k) * d);
  for (int c = 0; c < k; ++c) {
    std::copy_n(&states[order[c] * d], d, &centroids[static_cast<size_t>(c) * d]);
  }
  Tensor x(const_cast<float*>(states.data()), {n, d});
  Tensor dots = Tensor::Empty({n, k});
  std::vector<double> sums(centroids.size());
  std::vector<int64_t> sizes(k);
  assignment->assign(n, 0);
  for (int it = 0; it <= iterations; ++it) {
    // argmin |x - c|^2 = argmax x.c - |c|^2 / 2
    Gemm(x, false, Tensor(centroids.data(), {k, d}), true, dots);
    std::vector<float> half(k);
    for (int c = 0; c < k; ++c) {
      double s = 0;
      for (int64_t j = 0; j < d; ++j) s += centroids[c * d + j] * centroids[c * d + j];
      half[c] = static_cast<float>(s / 2);
    }
    for (int64_t i = 0; i < n; ++i) {
      const float* row = dots.f32() + i * k;
      int best = 0;
      for (int c = 1; c < k; ++c) {
        if (row[c] - half[c] > row[best] - half[best]) best = c;
      }
      (*assignment)[i] = best;
    }
    if (it == iterations) break;
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(sizes.begin(), sizes.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      const int c = (*assignment)[i];
      ++sizes[c];
      for (int64_t j = 0; j < d; ++j) sums[c * d + j] += states[i * d + j];
    }
    for (int c = 0; c < k; ++c) {
      if (sizes[c] == 0) continue;  // an empty cluster keeps its centroid
      for (int64_t j = 0; j < d; ++j)
        centroids[c * d + j] = static_cast<float>(sums[c * d + j] / sizes[c]);
    }
  }
  return centroids;
}

VocabClusters::VocabClusters(int64_t vocab, int64_t dim, std::vector<float> centroids,
                             const std::vector<std::vector<int32_t>>& sets)
    : vocab_(vocab), dim_(dim), centroids_(std::move(centroids)) {
  CHECK_EQ(static_cast<int64_t>(centroids_.size()), static_cast<int64_t>(sets.size()) * dim);
  offsets_.push_back(0);
  for (const auto& s : sets) {
    ids_.insert(ids_.end(), s.begin(), s.end());
    offsets_.push_back(static_cast<int32_t>(ids_.size()));
  }
  ComputeNorms();
}

void VocabClusters::ComputeNorms() {
  const int64_t k = clusters();
  half_norms_.assign(k, 0.f);
  for (int64_t c = 0; c < k; ++c) {
    double s = 0;
    for (int64_t j = 0; j < dim_; ++j) s += centroids_[c * dim_ + j] * centroids_[c * dim_ + j];
    half_norms_[c] = static_cast<float>(s / 2);
  }
}

std::unique_ptr<VocabClusters> VocabClusters::FromWeights(const Weights& weights, int64_t vocab,
                                                          int64_t dim) {
  if (!weights.Has(kClusterCentroids) && !weights.Has(kClusterOffsets) &&
      !weights.Has(kClusterIds)) {
    return nullptr;
  }
  auto bad = [&](const std::string& what) {
    Fail(weights.source(), ": malformed vocabulary clusters: ", what, "; rebuild them");
  };
  const Tensor& cent = weights.Get(kClusterCentroids);
  const Tensor& offs = weights.Get(kClusterOffsets);
  const Tensor& ids = weights.Get(kClusterIds);
  if (cent.dtype() != DType::kFloat32 || cent.rank() != 2 || cent.dim(1) != dim ||
      cent.dim(0) < 1) {
    bad(std::string("centroids must be float32 (K, ") + std::to_string(dim) + "), got " +
        cent.shape().ToString());
  }
  const int64_t k = cent.dim(0);
  if (offs.dtype() != DType::kInt32 || offs.rank() != 1 || offs.dim(0) != k + 1) {
    bad("offsets must be int32 (K + 1)");
  }
  if (ids.dtype() != DType::kInt32 || ids.rank() != 1) bad("ids must be 1-D int32");
  std::unique_ptr<VocabClusters> v(new VocabClusters());
  v->vocab_ = vocab;
  v->dim_ = dim;
  v->centroids_.assign(cent.f32(), cent.f32() + cent.numel());
  v->offsets_.assign(offs.i32(), offs.i32() + offs.numel());
  v->ids_.assign(ids.i32(), ids.i32() + ids.numel());
  if (v->offsets_.front() != 0 || v->offsets_.back() != static_cast<int32_t>(v->ids_.size())) {
    bad("offsets do not cover the ids");
  }
  for (int64_t c = 0; c < k; ++c) {
    if (v->offsets_[c + 1] < v->offsets_[c]) bad("offsets decrease");
  }
  for (int32_t id : v->ids_) {
    if (id < 0 || id >= vocab) bad("token id outside the vocabulary");
  }
  v->ComputeNorms();
  return v;
}

std::vector<NamedTensor> VocabClusters::ToTensors() const {
  return {{kClusterCentroids, Owned(centroids_, {clusters(), dim_})},
          {kClusterOffsets, OwnedInts(offsets_)},
          {kClusterIds, OwnedInts(ids_)}};
}

int32_t VocabClusters::Nearest(const float* state) const {
  int32_t best = 0;
  float best_score = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < clusters(); ++c) {
    const float* centroid = &centroids_[c * dim_];
    float dot = 0;
    for (int64_t j = 0; j < dim_; ++j) dot += state[j] * centroid[j];
    if (dot - half_norms_[c] > best_score) {
      best_score = dot - half_norms_[c];
      best = static_cast<int32_t>(c);
    }
  }
  return best;
}

void VocabClusters::Select(const Tensor& x, std::vector<int32_t>* ids) const {
  CHECK(x.cols() == dim_) << "VocabClusters::Select: states " << x.shape().ToString();
  // Scratch of this thread's: the searches of several CPU workers share one clustering.
  thread_local std::vector<int32_t> nearest;
  nearest.resize(x.rows());
  for (int64_t r = 0; r < x.rows(); ++r) nearest[r] = Nearest(x.f32() + r * dim_);
  SelectClusters(nearest.data(), x.rows(), ids);
}

void VocabClusters::SelectClusters(const int32_t* nearest, int64_t rows,
                                   std::vector<int32_t>* ids) const {
  thread_local std::vector<uint8_t> marks;
  marks.assign(vocab_, 0);
  marks[kEosId] = 1;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t c = nearest[r];
    CHECK(c >= 0 && c < clusters()) << "SelectClusters: cluster " << c;
    for (int32_t i = offsets_[c]; i < offsets_[c + 1]; ++i) marks[ids_[i]] = 1;
  }
  ids->clear();
  for (int64_t v = 0; v < vocab_; ++v) {
    if (marks[v]) ids->push_back(static_cast<int32_t>(v));
  }
}

}  // namespace tern::inference
