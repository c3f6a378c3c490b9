// ParamStore::Borrow: a step on borrowed buffers (virtual workers' copies) reads the borrowed
// values and writes the borrowed gradient, with the bits of the same step on the store's own
// buffers holding those values; Restore gives the store its own buffers back untouched.
#include "graph/params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "graph/graph.h"
#include "graph/ops.h"
#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern::graph {
namespace {

ParamStore* NewStore() {
  auto* store = new ParamStore;
  store->Add("w", Shape{24, 40}, Init::kNormal, 1.f);
  store->Add("b", Shape{40}, Init::kNormal, 1.f);
  store->Finalize(Device::kCpu, 11);
  return store;
}

// The gradient of Sum(ReLU(x w + b)) over the store's current buffers, bf16 products (the
// bias's gradient from the fused rounding pass) or float32.
void Step(ParamStore& store, DType inputs) {
  Arena arena(Device::kCpu, 1 << 20);
  Graph g(&arena, /*training=*/true, /*seed=*/3);
  g.set_matmul_inputs(inputs);
  std::vector<float> x(30 * 24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  const Var in = g.Constant(Tensor::FromVector({30, 24}, x));
  store.ZeroGrads();
  g.Backward(Sum(Linear(in, g.Param(store, 0), g.Param(store, 1), false, /*relu=*/true)));
}

TEST(ParamStoreTest, ABorrowedStepHasTheBitsOfTheOwnOne) {
  for (const DType inputs : {DType::kFloat32, DType::kBFloat16}) {
    std::unique_ptr<ParamStore> own(NewStore()), borrower(NewStore());
    const int64_t n = own->total_size();
    // Values unlike the borrower's own, which must stay as they are.
    std::vector<float> values = own->values_flat().ToVector();
    for (float& v : values) v = 0.5f * v + 0.25f;
    Copy(Tensor::FromVector({n}, values), own->values_flat());
    const std::vector<float> borrower_values = borrower->values_flat().ToVector();
    Step(*own, inputs);
    std::vector<float> grads(n, std::numeric_limits<float>::quiet_NaN());
    borrower->Borrow(values.data(), grads.data());
    EXPECT_EQ(borrower->values_flat().raw(), values.data());
    Step(*borrower, inputs);
    borrower->Restore();
    const std::vector<float> want = own->grads_flat().ToVector();
    ASSERT_EQ(0, std::memcmp(want.data(), grads.data(), n * sizeof(float)))
        << DTypeName(inputs) << ": the borrowed gradient differs";
    EXPECT_EQ(borrower->values_flat().ToVector(), borrower_values);
    EXPECT_EQ(borrower->grads_flat().ToVector(), std::vector<float>(n, 0.f))
        << "the store's own gradient was written while borrowed";
    // Without a gradient buffer, the store's own takes it.
    borrower->Borrow(values.data(), nullptr);
    Step(*borrower, inputs);
    EXPECT_EQ(borrower->grads_flat().ToVector(), want);
    borrower->Restore();
  }
}

}  // namespace
}  // namespace tern::graph
