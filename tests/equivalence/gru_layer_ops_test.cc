// On a GPU a GRU layer's backward pass is a long run of small ops, one launch each, so what it
// launches per step is its cost at the batch sizes RNNs train at. Graph gradients that are
// written rather than zero-filled and added to (Graph::AccumulateGrad, GiveGrad, GradForProduct)
// keep it to the step's own work: GruStep's backward, the zeroing of the two gradients it adds
// into, a copy of the gates' gradient for the recurrent product, the two input slices' additions
// and four products (the state's and the weights' gradients of s U and s Ux).
#include <gtest/gtest.h>

#include "graph/graph.h"
#include "graph/ops.h"
#include "graph/params.h"
#include "models/rnn_layers.h"
#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern {
namespace {

TEST(GruLayerOnAGpuTest, ItsBackwardLaunchesTenOpsAStep) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const int64_t len = 12, batch = 3, in = 8, d = 8;
  graph::ParamStore params;
  models::AddGruParams(&params, "gru", in, d, /*layer_norm=*/false);
  params.Add("x", {len, batch, in}, graph::Init::kNormal, 1.f);
  params.Finalize(Device::kCuda, 1);
  Arena arena(Device::kCuda);
  graph::Graph g(&arena, /*training=*/true, 1);
  const models::RnnCtx ctx{g, params};
  const graph::Var states = models::RunGruLayer(ctx, {"gru"}, ctx.P("x"), d, Tensor(), false);
  const graph::Var loss = graph::Sum(states);
  params.ZeroGrads();
  const int64_t before = DeviceOps();
  g.Backward(loss);
  const double per_step = static_cast<double>(DeviceOps() - before) / len;
  // The input projections' backward and the stacking's come once a layer: a fraction a step.
  EXPECT_LE(per_step, 10 + 1) << "ops per step of the GRU layer's backward pass";
  std::printf("ops per step of the backward pass: %.2f\n", per_step);
}

}  // namespace
}  // namespace tern
