// Attention of one query row on the CPU, for the decoder's step: a query against its own keys and
// values, without the packing a BLAS product pays for such small shapes. The KV cache's
// self-attention and the CPU's Attend kernel (tensor/ops.h; attend_row.cc) use it.
#pragma once

#include <cstdint>

namespace tern::cpu {

// out (dk) = sum_t softmax_t(scale * q . keys[t]) values[t] over t < len, where keys and values
// are (len, dk) row-major. A key with mask[t] == 0 gets no weight (mask may be null); when every
// key is masked, out is zeros. scores is scratch of len floats.
void AttendRow(const float* q, const float* keys, const float* values, const float* mask,
               int64_t len, int64_t dk, float scale, float* scores, float* out);

// AttendRow over rows found through a list: key t is keys + index[t] * stride (likewise the
// values), for t < len, with no mask. Gives AttendRow's bits for the same rows when dk is a
// multiple of 8 (with other dk the scalar tails may fuse their products differently).
void AttendRowGathered(const float* q, const float* keys, const float* values, const int32_t* index,
                       int64_t stride, int64_t len, int64_t dk, float scale, float* scores,
                       float* out);

// x[i] = exp(x[i] - shift) for x[i] <= shift (a softmax's scores less their maximum): within
// 2 ulp of std::exp, and 0 below exp(-87.3) and for -inf. Returns the sum.
float ExpShiftedInPlace(float* x, int64_t n, float shift);
// The sum ExpShiftedInPlace returns, without writing x: the same bits (a log-softmax's).
float SumExpShifted(const float* x, int64_t n, float shift);

}  // namespace tern::cpu
