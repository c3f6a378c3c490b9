// Where a whole-layer GRU kernel (cuDNN's RNN) keeps a layer's weights, and how Tern's parameters
// map onto that "weight space": a pure description, shared by the CUDA path (which reads the
// offsets from cuDNN and packs with a kernel) and the CPU reference (tensor/cpu/gru_layer.cc, which
// packs on the host), so that the mapping is tested where there is no GPU.
//
// cuDNN's GRU (cudnn_adv.h, CUDNN_GRU with CUDNN_RNN_DOUBLE_BIAS), for each direction:
//   r = sigmoid(W_r x + b_Wr + R_r h + b_Rr)
//   z = sigmoid(W_z x + b_Wz + R_z h + b_Rz)
//   n = tanh(W_n x + b_Wn + r * (R_n h + b_Rn))
//   h' = (1 - z) * n + z * h
// Tern's (models/rnn_layers.h), W stored (in, out):
//   r, z = sigmoid(x W + b + s U);  h = tanh(x Wx + bx + r * (s Ux));  s' = z * s + (1 - z) * h.
// The same function when W_r, W_z are W's two column blocks transposed, W_n = Wx^T, R_r, R_z = U's
// blocks transposed, R_n = Ux^T, b_Wr, b_Wz = b's halves, b_Wn = bx, and the recurrent biases
// b_R* are 0 (Tern has none; its candidate has no bias inside r * (...)).
// cuDNN numbers a direction's matrices (linLayerID) 0-2 for x's (reset, update, new gate) and 3-5
// for h's, each (hidden, input) row-major: element [j][k] multiplies input k into gate unit j. A
// bidirectional layer's directions are its pseudo-layers 0 (left to right) and 1.
#pragma once

#include <cstdint>
#include <vector>

namespace tern {

// The Tern parameter a weight-space block is copied from (kGruZero: none, the block is zeros).
enum GruSource : int { kGruW, kGruWx, kGruU, kGruUx, kGruB, kGruBx, kGruZero, kGruSourceCount };

// Offsets in elements from the start of the weight space of each direction's six matrices and six
// biases, by linLayerID; `size` the space's elements.
struct GruWeightLayout {
  int64_t in = 0, d = 0;
  int directions = 1;
  int64_t size = 0;
  int64_t matrix[2][6] = {};
  int64_t bias[2][6] = {};
};

// The layout cuDNN's documentation describes (a direction's matrices in linLayerID order, then its
// biases; the directions one after the other): what the CPU reference packs into. The CUDA path
// asks cuDNN instead (cudnnGetRNNWeightParams) and uses whatever it says.
GruWeightLayout CanonicalGruWeightLayout(int64_t in, int64_t d, int directions);

// One block of the weight space: for j < rows, k < cols,
//   space[offset + j * cols + k] = source[k * source_cols + column + j]
// a (rows, cols) transpose of the source's columns [column, column + rows); a bias has cols 1.
struct GruPackSegment {
  int direction = 0;
  GruSource source = kGruZero;
  int64_t column = 0;
  int64_t source_cols = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t offset = 0;
};

// Every block of the layout: 12 a direction (the matrices, then the biases, by linLayerID).
std::vector<GruPackSegment> GruPackSegments(const GruWeightLayout& layout);

// Host executors of the segments (the CUDA kernels in tensor/cuda/cudnn_gru.cu compute the same):
// sources[direction][GruSource] are Tern's float32 parameters (kGruZero's unused).
// Pack writes every segment's block of `space` (layout.size floats; zeros for kGruZero).
void PackGruWeights(const std::vector<GruPackSegment>& segments,
                    const float* const sources[2][kGruSourceCount], float* space);
// Unpack ADDS each segment's block of `space` (a gradient in the weight space) into its source's
// gradient (grads[direction][source], skipped where null; kGruZero's are dropped).
void UnpackGruWeightGrads(const std::vector<GruPackSegment>& segments, const float* space,
                          float* const grads[2][kGruSourceCount]);

}  // namespace tern
