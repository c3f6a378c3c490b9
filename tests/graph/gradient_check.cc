#include "gradient_check.h"

#include <cmath>
#include <random>

#include "tensor/arena.h"

namespace tern::graph::testing {

void CheckGradients(const std::vector<Shape>& shapes, const Builder& build, const Reference& ref,
                    const GradCheckOptions& options) {
  ParamStore store;
  for (size_t i = 0; i < shapes.size(); ++i)
    store.Add("in" + std::to_string(i), shapes[i], Init::kNormal, options.init_std);
  store.Finalize(Device::kCpu, 7);

  Arena arena;
  Graph g(&arena, /*training=*/false);
  std::vector<Var> inputs;
  for (int i = 0; i < store.size(); ++i) inputs.push_back(g.Param(store, i));
  Var out = build(g, inputs);

  // loss = Σ r ⊙ out with fixed random weights r, so every output element matters.
  const int64_t n_out = out.value().numel();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  Tensor r = arena.Alloc(out.shape());
  for (int64_t i = 0; i < n_out; ++i) r.f32()[i] = dist(rng);
  Var loss = Sum(Mul(out, g.Constant(r)));
  g.Backward(loss);

  std::vector<Vec> x(shapes.size());
  for (int i = 0; i < store.size(); ++i) {
    Tensor v = store.value(i);
    x[i].assign(v.f32(), v.f32() + v.numel());
  }
  Vec y = ref(x);
  ASSERT_EQ(static_cast<int64_t>(y.size()), n_out) << "reference output size";
  for (int64_t i = 0; i < n_out; ++i)
    ASSERT_NEAR(out.value().at(i), y[i], 1e-4 * std::max(1.0, std::abs(y[i])))
        << "forward value " << i;

  auto ref_loss = [&](const std::vector<Vec>& in) {
    Vec o = ref(in);
    double s = 0;
    for (int64_t i = 0; i < n_out; ++i) s += double(r.at(i)) * o[i];
    return s;
  };
  for (int p = 0; p < store.size(); ++p) {
    Tensor grad = store.grad(p);
    for (int64_t i = 0; i < grad.numel(); ++i) {
      std::vector<Vec> plus = x, minus = x;
      plus[p][i] += options.fd_step;
      minus[p][i] -= options.fd_step;
      double numeric = (ref_loss(plus) - ref_loss(minus)) / (2 * options.fd_step);
      double analytic = grad.at(i);
      ASSERT_LE(std::abs(analytic - numeric) / std::max(1.0, std::abs(numeric)), options.tolerance)
          << "input " << p << " element " << i << ": analytic " << analytic << " numeric "
          << numeric;
    }
  }
}

}  // namespace tern::graph::testing
