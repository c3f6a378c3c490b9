// fp16's loss scaling and the optimizer step decided on the parameters' device (LossScaler::
// MoveTo, StepOptions::apply): the host rule's decisions, scales and bits, with no value read by
// the host. On the CPU, and on a GPU where one is visible (the emulated one in CI).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "optim/loss_scale.h"
#include "optim/optimizer.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"

namespace tern::optim {
namespace {

std::vector<Device> Devices() {
  std::vector<Device> devices = {Device::kCpu};
  if (CudaAvailable()) devices.push_back(Device::kCuda);
  return devices;
}

Tensor On(Device device, const std::vector<float>& v) {
  Tensor t = Tensor::Empty(Shape{static_cast<int64_t>(v.size())}, DType::kFloat32, device);
  Copy(Tensor(const_cast<float*>(v.data()), Shape{static_cast<int64_t>(v.size())}), t);
  return t;
}

std::vector<float> Gradients(int64_t n, uint32_t seed, bool overflow) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1000.f);
  std::vector<float> g(n);
  for (float& x : g) x = dist(rng);
  if (overflow) g[seed % n] = seed % 2 ? std::numeric_limits<float>::infinity() : NAN;
  return g;
}

// Which of the steps overflow: the first, a run of good ones that doubles the scale twice, a
// second overflow, and good ones again.
const std::vector<bool> kOverflows = {true,  false, false, false, false, false, false,
                                      false, true,  false, false, true,  false, false};

TEST(LossScaleGateTest, DecidesScalesAndUnscalesAsTheHost) {
  const int64_t n = 5000;
  for (Device device : Devices()) {
    LossScaler host(65536.f, 3), gated(65536.f, 3);
    gated.MoveTo(device);
    for (size_t step = 0; step < kOverflows.size(); ++step) {
      const std::string where = std::string(DeviceName(device)) + " step " + std::to_string(step);
      EXPECT_EQ(gated.SeedScale().ToVector()[0], host.scale()) << where;
      std::vector<float> g = Gradients(n, static_cast<uint32_t>(step), kOverflows[step]);
      Tensor on_device = On(device, g);
      const float scale = host.scale();
      const bool finite = std::isfinite(SumSquares(Tensor(g.data(), Shape{n})));
      ASSERT_EQ(finite, !kOverflows[step]);
      const bool applies = host.Update(finite);
      if (applies) Scale(Tensor(g.data(), Shape{n}), 1.f / scale);
      gated.Decide(on_device);
      EXPECT_EQ(gated.Apply().ToVector()[0], applies ? 1.f : 0.f) << where;
      EXPECT_EQ(gated.scale(), host.scale()) << where;
      EXPECT_EQ(gated.good_steps(), host.good_steps()) << where;
      EXPECT_EQ(gated.skipped(), host.skipped()) << where;
      if (applies) {
        EXPECT_EQ(on_device.ToVector(), g) << where << ": not the host's unscaling";
      }
    }
    EXPECT_EQ(host.skipped(), 3);
    // Restored on the device, it continues as the host's.
    LossScaler restored(1.f, 3);
    restored.MoveTo(device);
    restored.Restore(host.scale(), host.good_steps());
    EXPECT_EQ(restored.scale(), host.scale());
    EXPECT_EQ(restored.good_steps(), host.good_steps());
    restored.Decide(On(device, Gradients(n, 99, false)));
    host.Update(true);
    EXPECT_EQ(restored.scale(), host.scale()) << DeviceName(device);
  }
}

// A gated optimizer stepped every time (apply 0 on the overflowed steps) against one stepped
// only on the applied steps: the same parameters and saved state, bit for bit.
TEST(StepGateTest, SkippedStepsChangeNothingAndAreNotCounted) {
  const int64_t n = 4097;
  for (Device device : Devices()) {
    for (auto make : {+[](int64_t k) { return MakeAdam(k, {.weight_decay = 0.01f}); },
                      +[](int64_t k) { return MakeSgd(k, 0.01f); }}) {
      auto reference = make(n), gated = make(n);
      std::vector<float> p(n, 0.5f);
      Tensor p_gated = On(device, p);
      const Tensor one = On(device, {1.f}), zero = On(device, {0.f});
      for (size_t step = 0; step < kOverflows.size(); ++step) {
        // Cooldown-like betas that move: the corrections must use this step's.
        const StepOptions o{0.01f, step < 6 ? 0.9f : 0.8f, step < 6 ? 0.999f : 0.99f, 0.5f};
        std::vector<float> g = Gradients(n, static_cast<uint32_t>(100 + step), false);
        if (!kOverflows[step])
          reference->Step(Tensor(p.data(), Shape{n}), Tensor(g.data(), Shape{n}), o);
        StepOptions gated_options = o;
        gated_options.apply = kOverflows[step] ? zero : one;
        gated->Step(p_gated, On(device, g), gated_options);
      }
      EXPECT_EQ(p_gated.ToVector(), p) << DeviceName(device) << " " << gated->name();
      EXPECT_EQ(gated->steps(), reference->steps());
      EXPECT_EQ(gated->SaveState(), reference->SaveState()) << gated->name();
      // An ungated step after them counts from the steps applied, as the reference's does.
      const StepOptions plain{0.01f, 0.9f, 0.999f, 1.f};
      std::vector<float> g = Gradients(n, 50, false);
      reference->Step(Tensor(p.data(), Shape{n}), Tensor(g.data(), Shape{n}), plain);
      gated->Step(p_gated, On(device, g), plain);
      EXPECT_EQ(p_gated.ToVector(), p) << DeviceName(device) << " " << gated->name() << ", ungated";
      EXPECT_EQ(gated->steps(), reference->steps());
      // Loaded, the count starts from the state's.
      auto loaded = make(n);
      loaded->LoadState(reference->SaveState());
      StepOptions o{0.01f, 0.9f, 0.999f, 1.f};
      o.apply = zero;
      loaded->Step(On(device, p), On(device, Gradients(n, 7, false)), o);
      EXPECT_EQ(loaded->steps(), reference->steps()) << gated->name();
    }
  }
}

}  // namespace
}  // namespace tern::optim
