#include "gradient_check.h"

#include <cmath>
#include <random>

#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern::graph::testing {
namespace {

int gpu_comparisons = 0;

// The graph `build` makes on `device` from the CPU run's inputs (cpu) and output weights r: its
// output and every input's gradient against the CPU's, within float32's tolerance for the sums'
// other order. Run on the GPU where one is visible; elsewhere on the CPU again, which checks that
// a graph built twice from the same inputs agrees (and keeps this code exercised in CI).
void CompareOn(Device device, const std::vector<Shape>& shapes, const Builder& build,
               const ParamStore& cpu, const Tensor& cpu_out, const Tensor& r) {
  ParamStore store;
  for (size_t i = 0; i < shapes.size(); ++i)
    store.Add("in" + std::to_string(i), shapes[i], Init::kNormal, 1.f);
  store.Finalize(device, 7);
  Copy(cpu.values_flat(), store.values_flat());
  Arena arena(device);
  Graph g(&arena, /*training=*/false);
  std::vector<Var> inputs;
  for (int i = 0; i < store.size(); ++i) inputs.push_back(g.Param(store, i));
  Var out = build(g, inputs);
  g.Backward(Sum(Mul(out, g.Constant(OnDevice(g, r)))));
  auto expect_near = [&](const Tensor& expected, const Tensor& got, const std::string& what) {
    const std::vector<float> a = expected.ToVector(), b = got.ToVector();
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(b[i], a[i], 1e-4 * std::max(1.f, std::abs(a[i])))
          << what << " element " << i << " on " << DeviceName(device);
    }
  };
  expect_near(cpu_out, out.value(), "forward value");
  for (int p = 0; p < store.size(); ++p) {
    expect_near(cpu.grad(p), store.grad(p), "gradient of input " + std::to_string(p));
  }
  if (device == Device::kCuda) ++gpu_comparisons;
}

}  // namespace

Tensor OnDevice(Graph& g, const Tensor& t) {
  const Device device = g.arena()->device();
  if (!t.defined() || t.device() == device) return t;
  Tensor copy = g.arena()->Alloc(t.shape(), t.dtype());
  Copy(t, copy);
  return copy;
}

int GpuComparisons() { return gpu_comparisons; }

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
  CompareOn(CudaAvailable() ? Device::kCuda : Device::kCpu, shapes, build, store, out.value(), r);
}

}  // namespace tern::graph::testing
