// Internal to tensor/cuda/: the kernels around cuDNN's RNN call for a whole GRU layer
// (cudnn_gru.cu), launched by cudnn_gru.cc. `type` is the layer's data type in cuDNN: kFloat32,
// kBFloat16 or kFloat16; a T* below points to elements of it. Every launcher queues on
// CurrentStream() and checks its launch.
#pragma once

#include <cstdint>

#include "tensor/gru_weight_layout.h"
#include "tensor/tensor.h"

namespace tern::cuda {

// The weight-space blocks of one layer (tensor/gru_weight_layout.h's segments) with the Tern
// parameters (pack) or gradients (unpack) they go to: passed by value to one launch.
constexpr int kMaxGruSegments = 24;
struct GruSegmentArgs {
  const float* source;  // pack: the parameter, null for zeros
  float* grad;          // unpack: the parameter's gradient, null to skip
  int64_t column, source_cols, rows, cols, offset;
};
struct GruSegmentList {
  int count;
  int64_t max_rows, max_cols;
  GruSegmentArgs segment[kMaxGruSegments];
};

// space (of `type`) = every segment's block from its source, rounded to `type`.
void PackGruWeightSpace(const GruSegmentList& list, DType type, void* space);
// Each segment's gradient += its block of `space` (of `type`).
void UnpackGruWeightSpace(const GruSegmentList& list, DType type, const void* space);
// lengths (batch) int32 = the ones of each column of mask (len, batch), or len without a mask.
void GruSequenceLengths(const float* mask, int64_t len, int64_t batch, int32_t* lengths);
// out (len, batch, dirs d) float32 = y (of `type`), except that the left-to-right half of a
// column's padded positions (t >= lengths[b]) repeats hy[0][b] (hy (dirs, batch, d) of `type`);
// hy null: no padding.
void FinishGruOutput(DType type, const void* y, const void* hy, const int32_t* lengths, int64_t len,
                     int64_t batch, int64_t d, int dirs, float* out);
// From dout (len, batch, dirs d) float32: dhy[0][b] (of `type`) = the sum of the left-to-right half
// over column b's padded positions, dhy[1] = 0, and those positions of dout set to 0 (dhy null:
// no padding); then dy (of `type`, null when dout itself is cuDNN's dy) = dout converted.
void PrepareGruOutputGrad(DType type, float* dout, const int32_t* lengths, int64_t len,
                          int64_t batch, int64_t d, int dirs, void* dy, void* dhy);
// dx (n) float32 = (accumulate ? dx : 0) + from (n, of `type`).
void AddGruInputGrad(DType type, const void* from, int64_t n, bool accumulate, float* dx);

}  // namespace tern::cuda
