#include "tensor/gru_weight_layout.h"

#include <glog/logging.h>

namespace tern {

GruWeightLayout CanonicalGruWeightLayout(int64_t in, int64_t d, int directions) {
  CHECK(in > 0 && d > 0 && (directions == 1 || directions == 2))
      << "GRU layout: in " << in << ", d " << d << ", directions " << directions;
  GruWeightLayout layout;
  layout.in = in;
  layout.d = d;
  layout.directions = directions;
  int64_t at = 0;
  for (int dir = 0; dir < directions; ++dir) {
    for (int id = 0; id < 6; ++id) {
      layout.matrix[dir][id] = at;
      at += d * (id < 3 ? in : d);
    }
    for (int id = 0; id < 6; ++id) {
      layout.bias[dir][id] = at;
      at += d;
    }
  }
  layout.size = at;
  return layout;
}

std::vector<GruPackSegment> GruPackSegments(const GruWeightLayout& layout) {
  const int64_t d = layout.d;
  // By linLayerID: the source, its first column and its row length. Gates r, z come from W's
  // (U's, b's) two column blocks, the candidate from Wx (Ux, bx); recurrent biases are zeros.
  struct From {
    GruSource source;
    int64_t column, source_cols;
  };
  const From matrices[6] = {{kGruW, 0, 2 * d}, {kGruW, d, 2 * d}, {kGruWx, 0, d},
                            {kGruU, 0, 2 * d}, {kGruU, d, 2 * d}, {kGruUx, 0, d}};
  const From biases[6] = {{kGruB, 0, 2 * d}, {kGruB, d, 2 * d}, {kGruBx, 0, d},
                          {kGruZero, 0, 0},  {kGruZero, 0, 0},  {kGruZero, 0, 0}};
  std::vector<GruPackSegment> segments;
  for (int dir = 0; dir < layout.directions; ++dir) {
    for (int id = 0; id < 6; ++id) {
      segments.push_back({dir, matrices[id].source, matrices[id].column, matrices[id].source_cols,
                          d, id < 3 ? layout.in : d, layout.matrix[dir][id]});
    }
    for (int id = 0; id < 6; ++id) {
      segments.push_back({dir, biases[id].source, biases[id].column, biases[id].source_cols, d, 1,
                          layout.bias[dir][id]});
    }
  }
  return segments;
}

void PackGruWeights(const std::vector<GruPackSegment>& segments,
                    const float* const sources[2][kGruSourceCount], float* space) {
  for (const GruPackSegment& s : segments) {
    float* out = space + s.offset;
    if (s.source == kGruZero) {
      for (int64_t i = 0; i < s.rows * s.cols; ++i) out[i] = 0.f;
      continue;
    }
    const float* src = sources[s.direction][s.source];
    CHECK(src != nullptr) << "PackGruWeights: no source " << s.source;
    for (int64_t j = 0; j < s.rows; ++j)
      for (int64_t k = 0; k < s.cols; ++k)
        out[j * s.cols + k] = src[k * s.source_cols + s.column + j];
  }
}

void UnpackGruWeightGrads(const std::vector<GruPackSegment>& segments, const float* space,
                          float* const grads[2][kGruSourceCount]) {
  for (const GruPackSegment& s : segments) {
    if (s.source == kGruZero) continue;
    float* grad = grads[s.direction][s.source];
    if (grad == nullptr) continue;
    const float* in = space + s.offset;
    for (int64_t j = 0; j < s.rows; ++j)
      for (int64_t k = 0; k < s.cols; ++k)
        grad[k * s.source_cols + s.column + j] += in[j * s.cols + k];
  }
}

}  // namespace tern
