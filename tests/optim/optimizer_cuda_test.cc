// The optimizers stepped on CUDA spans: the same parameters and the same saved state as on the
// CPU, state moved to the GPU at the first step and back for SaveState/LoadState. Skips without
// a visible GPU.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tern::optim {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor OnGpu(const std::vector<float>& v) {
  Tensor t = Tensor::Empty(Shape{static_cast<int64_t>(v.size())}, DType::kFloat32, Device::kCuda);
  Copy(Tensor(const_cast<float*>(v.data()), Shape{static_cast<int64_t>(v.size())}), t);
  return t;
}

std::vector<float> OnHost(const Tensor& t) {
  std::vector<float> v(t.numel());
  Copy(t, Tensor(v.data(), Shape{t.numel()}));
  return v;
}

TEST(OptimizerCudaTest, StepsSaveAndLoadLikeTheCpu) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const int64_t n = 100'003;
  for (auto make :
       {+[](int64_t k) { return MakeAdam(k, {}); }, +[](int64_t k) { return MakeSgd(k, 0.01f); }}) {
    auto cpu = make(n), gpu = make(n);
    std::vector<float> p = RandomVector(n, 1);
    Tensor p_gpu = OnGpu(p);
    const StepOptions o{0.01f, 0.9f, 0.99f, 0.5f};
    for (int step = 0; step < 3; ++step) {
      std::vector<float> g = RandomVector(n, 10 + step);
      cpu->Step(Tensor(p.data(), Shape{n}), Tensor(g.data(), Shape{n}), o);
      gpu->Step(p_gpu, OnGpu(g), o);
    }
    EXPECT_EQ(OnHost(p_gpu), p) << cpu->name();
    const std::string state = gpu->SaveState();
    EXPECT_EQ(state, cpu->SaveState()) << cpu->name();
    // A loaded state reaches the GPU copy: one more step on each still agrees.
    auto loaded = make(n);
    loaded->Step(OnGpu(std::vector<float>(n, 0.f)), OnGpu(std::vector<float>(n, 0.f)), o);
    loaded->LoadState(state);
    std::vector<float> g = RandomVector(n, 20);
    Tensor p_loaded = OnGpu(p);
    loaded->Step(p_loaded, OnGpu(g), o);
    cpu->Step(Tensor(p.data(), Shape{n}), Tensor(g.data(), Shape{n}), o);
    EXPECT_EQ(OnHost(p_loaded), p) << cpu->name();
    // An optimizer's state stays on one device. (A forked child cannot use CUDA: re-exec.)
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(loaded->Step(Tensor(p.data(), Shape{n}), Tensor(g.data(), Shape{n}), o),
                 "two devices");
  }
}

// Regression (H100, 2026-11-27: ps_gpu_test's sync step waited twice): the state's first use on
// the GPU is zero-filled there, not copied up from the host's zeros; a state loaded before the
// first step still reaches the GPU.
TEST(OptimizerCudaTest, TheFirstStepWaitsForNoCopyAndALoadBeforeItArrives) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  const int64_t n = 4099;
  const StepOptions o{0.01f, 0.9f, 0.99f, 0.5f};
  for (auto make :
       {+[](int64_t k) { return MakeAdam(k, {}); }, +[](int64_t k) { return MakeSgd(k, 0.01f); }}) {
    auto cpu = make(n), gpu = make(n);
    std::vector<float> p = RandomVector(n, 3);
    const std::vector<float> g = RandomVector(n, 4);
    Tensor p_gpu = OnGpu(p), g_gpu = OnGpu(g);
    const int64_t before = DeviceDrains();
    gpu->Step(p_gpu, g_gpu, o);
    EXPECT_EQ(DeviceDrains(), before) << cpu->name() << ": the first step waited for the GPU";
    cpu->Step(Tensor(p.data(), Shape{n}), Tensor(const_cast<float*>(g.data()), Shape{n}), o);
    EXPECT_EQ(OnHost(p_gpu), p) << cpu->name();

    auto loaded = make(n);
    loaded->LoadState(cpu->SaveState());
    Tensor p_loaded = OnGpu(p);
    loaded->Step(p_loaded, g_gpu, o);
    cpu->Step(Tensor(p.data(), Shape{n}), Tensor(const_cast<float*>(g.data()), Shape{n}), o);
    EXPECT_EQ(OnHost(p_loaded), p) << cpu->name() << ": the loaded state did not reach the GPU";
  }
}

}  // namespace
}  // namespace tern::optim
