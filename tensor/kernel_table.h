// The kernels one device provides, as a table of functions. tensor/ops.cc is the one dispatch
// point: it checks shapes, then calls the table of the tensors' device. Contracts for each entry
// are the ones written in tensor/ops.h.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace tern {

struct KernelTable {
  // c = alpha * op(a) @ op(b) + beta * c for 2-D a, b, c (rows, cols).
  void (*gemm)(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor& c,
               float alpha, float beta);
  // The same over a leading batch dim: a (batch, m|k, k|m), b (batch, ...), c (batch, m, n).
  void (*batched_gemm)(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                       const Tensor& c, float alpha, float beta);
  void (*fill)(const Tensor& x, float value);
  void (*copy)(const Tensor& src, const Tensor& dst);
  // out = alpha * a + beta * b (out may alias a or b).
  void (*add)(const Tensor& a, const Tensor& b, const Tensor& out, float alpha, float beta);
  // out = a * b elementwise, out += ... when accumulate.
  void (*mul)(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate);
  // x (rows, n) += bias (n), in place.
  void (*add_bias)(const Tensor& x, const Tensor& bias);
  // out (n) = beta * out + sum over rows of x (rows, n).
  void (*sum_rows)(const Tensor& x, const Tensor& out, float beta);
  // Unary activations: out = f(x); backward: dx += dy * f'(x) given y = f(x).
  void (*unary)(int op, const Tensor& x, const Tensor& out);
  void (*unary_backward)(int op, const Tensor& y, const Tensor& dy, const Tensor& dx);
  void (*softmax)(const Tensor& x, const Tensor& out, const Tensor& key_mask, bool causal,
                  float scale);
  void (*softmax_backward)(const Tensor& y, const Tensor& dy, const Tensor& dx, float scale);
  void (*log_softmax)(const Tensor& x, const Tensor& out);
  void (*layer_norm)(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& out,
                     const Tensor& mean, const Tensor& rstd, float eps);
  void (*layer_norm_backward)(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                              const Tensor& rstd, const Tensor& dy, const Tensor& dx,
                              const Tensor& dgamma, const Tensor& dbeta);
  void (*cross_entropy)(const Tensor& logits, const Tensor& targets, float smoothing,
                        int32_t ignore_id, const Tensor& loss, const Tensor& lse);
  void (*cross_entropy_backward)(const Tensor& logits, const Tensor& targets, float smoothing,
                                 int32_t ignore_id, const Tensor& lse, const Tensor& dloss,
                                 const Tensor& dlogits);
  void (*gather_rows)(const Tensor& table, const Tensor& ids, const Tensor& out, float scale);
  void (*scatter_add_rows)(const Tensor& dout, const Tensor& ids, const Tensor& dtable,
                           float scale);
  void (*permute_0213)(const Tensor& in, const Tensor& out, bool accumulate);
  void (*dropout_mask)(const Tensor& mask, float keep_prob, uint64_t seed);
  void (*sum_squares)(const Tensor& x, double* out);
};

// Unary ops for KernelTable::unary.
enum UnaryOp : int { kRelu = 0, kTanh = 1, kSigmoid = 2, kGelu = 3 };

}  // namespace tern
