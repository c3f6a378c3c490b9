// A backward op writes its input's gradient while that gradient is new, instead of adding into a
// zero-filled block (Graph::GradToWrite: on a GPU a launch and two passes over the block fewer),
// and adds into it once another consumer has written it. Each op runs three ways on an arena
// whose memory was filled with NaN first, so that a gradient block the op did not wholly write
// shows: on the parameter itself (its gradient is added into), on an intermediate node with one
// consumer (written), and on one with two (written, then added into). The gradients must be g,
// g and exactly 2g.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "graph/graph.h"
#include "graph/ops.h"
#include "graph/params.h"
#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern::graph {
namespace {

// The op under test, applied to h; it may read the extra parameters (gamma, beta, weights).
using Op = std::function<Var(Graph& g, Var h, const std::vector<Var>& extra)>;

enum class Use { kParameter, kOnce, kTwice };

// d Sum(op(x)) / dx (Sum(op(h) + op(h)) with kTwice), x of `shape`.
std::vector<float> GradientOfX(Device device, const Shape& shape,
                               const std::vector<Shape>& extra_shapes, const Op& op, Use use) {
  ParamStore store;
  store.Add("x", shape, Init::kNormal, 1.f);
  for (size_t k = 0; k < extra_shapes.size(); ++k) {
    store.Add("extra" + std::to_string(k), extra_shapes[k], Init::kNormal, 1.f);
  }
  store.Finalize(device, 7);
  store.ZeroGrads();
  Arena arena(device, 1 << 20);
  const Tensor poison = arena.Alloc({200000});
  Fill(poison, std::numeric_limits<float>::quiet_NaN());
  arena.Reset();  // the next blocks come from the NaN-filled memory
  Graph g(&arena, /*training=*/true, /*seed=*/3);
  const Var x = g.Param(store, 0);
  std::vector<Var> extra;
  for (size_t k = 0; k < extra_shapes.size(); ++k) extra.push_back(g.Param(store, 1 + k));
  Var y;
  if (use == Use::kParameter) {
    y = op(g, x, extra);
  } else {
    const Var h = Scale(x, 1.f);  // an intermediate node: its gradient starts unwritten
    y = use == Use::kOnce ? op(g, h, extra) : Add(op(g, h, extra), op(g, h, extra));
  }
  g.Backward(Sum(y));
  return store.grad(0).ToVector();
}

void ExpectWrittenThenAdded(const Shape& shape, const std::vector<Shape>& extra, const Op& op) {
  std::vector<Device> devices = {Device::kCpu};
  if (CudaAvailable()) devices.push_back(Device::kCuda);
  for (Device device : devices) {
    SCOPED_TRACE(device == Device::kCpu ? "on the CPU" : "on the GPU");
    const std::vector<float> param = GradientOfX(device, shape, extra, op, Use::kParameter);
    const std::vector<float> once = GradientOfX(device, shape, extra, op, Use::kOnce);
    const std::vector<float> twice = GradientOfX(device, shape, extra, op, Use::kTwice);
    int nonzero = 0;
    for (size_t i = 0; i < param.size(); ++i) {
      ASSERT_TRUE(std::isfinite(param[i])) << "element " << i;
      nonzero += param[i] != 0.f;
      EXPECT_EQ(once[i], param[i]) << "element " << i << ": the written gradient";
      EXPECT_EQ(twice[i], 2.f * param[i]) << "element " << i << ": written, then added into";
    }
    EXPECT_GT(nonzero, 0) << "a gradient of zeros would not show a missed write";
  }
}

Op Unary(Var (*f)(Var)) {
  return [f](Graph&, Var h, const std::vector<Var>&) { return f(h); };
}

TEST(BackwardWritesTest, Activations) {
  ExpectWrittenThenAdded({5, 7}, {}, Unary(&Relu));
  ExpectWrittenThenAdded({5, 7}, {}, Unary(&Tanh));
  ExpectWrittenThenAdded({5, 7}, {}, Unary(&Sigmoid));
  ExpectWrittenThenAdded({5, 7}, {}, Unary(&Gelu));
}

TEST(BackwardWritesTest, LinearWithReluThroughItsOwnScratchGradient) {
  // The weight's gradient (added into, a parameter's) keeps the sum from being h-independent.
  ExpectWrittenThenAdded({2, 3, 6}, {{6, 5}, {5}}, [](Graph&, Var h, const std::vector<Var>& p) {
    return Linear(h, p[0], p[1], /*trans_w=*/false, /*relu=*/true);
  });
}

TEST(BackwardWritesTest, SoftmaxPlainAndMaskedCausal) {
  // Sum(softmax) is constant: a product with a fixed weight makes its gradient non-zero.
  ExpectWrittenThenAdded({4, 5}, {{4, 5}}, [](Graph&, Var h, const std::vector<Var>& p) {
    return Mul(Softmax(h), p[0]);
  });
  const Tensor mask = Tensor::FromVector({2, 3}, {1, 1, 1, 1, 1, 0});
  ExpectWrittenThenAdded({2, 2, 3, 3}, {{2, 2, 3, 3}},
                         [&](Graph& g, Var h, const std::vector<Var>& p) {
                           return Mul(Softmax(h, testing::OnDevice(g, mask), true, 0.5f), p[0]);
                         });
}

TEST(BackwardWritesTest, LayerNorm) {
  ExpectWrittenThenAdded(
      {3, 4, 8}, {{8}, {8}, {3, 4, 8}},
      [](Graph&, Var h, const std::vector<Var>& p) { return Mul(LayerNorm(h, p[0], p[1]), p[2]); });
}

TEST(BackwardWritesTest, SplitMergeAndTransposeThePermutation) {
  ExpectWrittenThenAdded({2, 3, 8}, {{4, 3, 4}}, [](Graph&, Var h, const std::vector<Var>& p) {
    return Mul(SplitHeads(h, 2), p[0]);
  });
  ExpectWrittenThenAdded({4, 3, 4}, {{2, 3, 8}}, [](Graph&, Var h, const std::vector<Var>& p) {
    return Mul(MergeHeads(h, 2), p[0]);
  });
  ExpectWrittenThenAdded({3, 2, 4}, {{2, 3, 4}}, [](Graph&, Var h, const std::vector<Var>& p) {
    return Mul(Transpose01(h), p[0]);
  });
}

TEST(BackwardWritesTest, MulOfTwoNodesAndOfANodeWithItself) {
  ExpectWrittenThenAdded({5, 6}, {{5, 6}},
                         [](Graph&, Var h, const std::vector<Var>& p) { return Mul(h, p[0]); });
  ExpectWrittenThenAdded({5, 6}, {},
                         [](Graph&, Var h, const std::vector<Var>&) { return Mul(h, h); });
}

TEST(BackwardWritesTest, CrossEntropyWritesItsIgnoredRowsToo) {
  const Tensor targets = Tensor::FromInts({4}, {3, 0, 5, 1});  // row 1 ignored (id 0)
  ExpectWrittenThenAdded({2, 2, 6}, {}, [&](Graph& g, Var h, const std::vector<Var>&) {
    return CrossEntropy(h, testing::OnDevice(g, targets), 0.1f, 0);
  });
}

}  // namespace
}  // namespace tern::graph
