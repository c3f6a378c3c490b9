#include "inference/transformer/aan.h"

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::inference {

Tensor CumulativeAverage(const Tensor& y, Arena& arena) {
  CHECK_EQ(y.rank(), 3) << "CumulativeAverage: y must be (B, T, d)";
  CHECK(y.device() == Device::kCpu) << "CumulativeAverage: CPU tensors only (the decoder's step "
                                       "keeps running sums on any device)";
  const int64_t batch = y.dim(0), len = y.dim(1), d = y.dim(2);
  Tensor avg = arena.Alloc(y.shape());
  for (int64_t b = 0; b < batch; ++b) {
    const float* in = y.f32() + b * len * d;
    float* out = avg.f32() + b * len * d;
    for (int64_t i = 0; i < d; ++i) {
      float sum = 0.f;
      for (int64_t t = 0; t < len; ++t) {
        sum += in[t * d + i];
        out[t * d + i] = sum / static_cast<float>(t + 1);
      }
    }
  }
  return avg;
}

Tensor AverageAttentionBody(const AanParams& p, const Tensor& y, const Tensor& avg, Activation act,
                            Arena& arena) {
  Tensor g = p.has_ffn ? FeedForward(avg, p.ffn, act, arena) : avg;
  if (!p.has_gate) return g;
  Tensor input_gate = Linear(y, p.wi, p.bi, arena).Reshape(y.shape());
  Tensor forget_gate = Linear(g, p.wf, p.bf, arena).Reshape(y.shape());
  Unary(kSigmoid, input_gate, input_gate);
  Unary(kSigmoid, forget_gate, forget_gate);
  Tensor out = arena.Alloc(y.shape());
  Mul(y, input_gate, out);
  Mul(g.Reshape(y.shape()), forget_gate, out, /*accumulate=*/true);
  return out;
}

}  // namespace tern::inference
