// Adam and SGD against double-precision references; state save/load round trips; clipping.
#include "optim/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/error.h"
#include "optim/clip.h"

namespace tern::optim {
namespace {

std::vector<float> RandomVector(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor View(std::vector<float>& v) {
  return Tensor(v.data(), Shape{static_cast<int64_t>(v.size())});
}

// Adam in double precision, written from the paper's algorithm.
struct AdamReference {
  std::vector<double> m, v;
  int t = 0;
  void Step(std::vector<double>& p, const std::vector<float>& g, double lr, double b1, double b2,
            double eps, double wd, double scale) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0);
    ++t;
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i] * scale;
      m[i] = b1 * m[i] + (1 - b1) * gi;
      v[i] = b2 * v[i] + (1 - b2) * gi * gi;
      const double mhat = m[i] / (1 - std::pow(b1, t));
      const double vhat = v[i] / (1 - std::pow(b2, t));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps) + lr * wd * p[i];
    }
  }
};

TEST(AdamTest, MatchesDoubleReferenceOverSeveralSteps) {
  const int64_t n = 70001;  // odd size, several thread chunks
  std::vector<float> params = RandomVector(n, 1);
  std::vector<double> ref(params.begin(), params.end());
  AdamOptions options{1e-8f, 0.01f};
  auto adam = MakeAdam(n, options);
  AdamReference reference;
  for (int step = 0; step < 6; ++step) {
    std::vector<float> grads = RandomVector(n, 100 + step, 0.1f);
    StepOptions o;
    o.learning_rate = 1e-3f * (step + 1);
    // Betas change mid-way, as momentum cooldown does.
    o.beta1 = step < 3 ? 0.9f : 0.8f;
    o.beta2 = step < 3 ? 0.999f : 0.99f;
    o.grad_scale = step == 4 ? 0.5f : 1.f;
    adam->Step(View(params), View(grads), o);
    reference.Step(ref, grads, o.learning_rate, o.beta1, o.beta2, 1e-8, 0.01, o.grad_scale);
  }
  EXPECT_EQ(adam->steps(), 6);
  EXPECT_EQ(adam->state_size(), 2 * n);
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) max_err = std::max(max_err, std::abs(params[i] - ref[i]));
  EXPECT_LT(max_err, 2e-6);
}

TEST(AdamTest, FirstStepMovesEachParameterByLearningRate) {
  // With bias correction the first Adam step is lr * sign(g) (up to eps).
  std::vector<float> params = {1.f, -2.f, 3.f};
  std::vector<float> grads = {0.5f, -4.f, 1e-3f};
  auto adam = MakeAdam(3, AdamOptions{});
  adam->Step(View(params), View(grads), StepOptions{0.1f, 0.9f, 0.999f, 1.f});
  EXPECT_NEAR(params[0], 0.9f, 1e-5f);
  EXPECT_NEAR(params[1], -1.9f, 1e-5f);
  EXPECT_NEAR(params[2], 2.9f, 1e-4f);
}

TEST(SgdTest, MomentumMatchesReference) {
  const int64_t n = 1000;
  std::vector<float> params = RandomVector(n, 7);
  std::vector<double> ref(params.begin(), params.end());
  std::vector<double> u(n, 0);
  auto sgd = MakeSgd(n, 0.001f);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> grads = RandomVector(n, 200 + step);
    StepOptions o{0.05f, 0.9f, 0.f, 1.f};
    sgd->Step(View(params), View(grads), o);
    for (int64_t i = 0; i < n; ++i) {
      u[i] = 0.9 * u[i] + grads[i];
      ref[i] -= 0.05 * u[i] + 0.05 * 0.001 * ref[i];
    }
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(params[i], ref[i], 1e-5) << i;
  EXPECT_EQ(sgd->state_size(), n);
}

TEST(SgdTest, NesterovMatchesReference) {
  const int64_t n = 1000;
  std::vector<float> params = RandomVector(n, 8);
  std::vector<double> ref(params.begin(), params.end());
  std::vector<double> u(n, 0);
  auto sgd = MakeSgd(n, 0.f, /*nesterov=*/true);
  for (int step = 0; step < 5; ++step) {
    std::vector<float> grads = RandomVector(n, 210 + step);
    sgd->Step(View(params), View(grads), StepOptions{0.7f, 0.9f, 0.f, 0.5f});
    for (int64_t i = 0; i < n; ++i) {
      const double g = 0.5 * grads[i];
      u[i] = 0.9 * u[i] + g;
      ref[i] -= 0.7 * (g + 0.9 * u[i]);
    }
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(params[i], ref[i], 1e-4) << i;
}

// Local SGD's asynchronous outer optimizer: `delay` steps move the parameters as one step of the
// optimizer on their mean does, each step's own gradient applied at once.
TEST(DelayedMomentumSgdTest, DelayStepsMoveAsOneStepOnTheirMean) {
  const int64_t n = 500;
  const int delay = 3;
  for (const bool nesterov : {true, false}) {
    std::vector<float> delayed = RandomVector(n, 9), once = delayed;
    auto a = MakeDelayedMomentumSgd(n, delay, nesterov);
    auto b = MakeSgd(n, 0.f, nesterov);
    for (int round = 0; round < 4; ++round) {
      std::vector<float> mean(n, 0.f);
      for (int k = 0; k < delay; ++k) {
        std::vector<float> g = RandomVector(n, 500 + 10 * round + k);
        const std::vector<float> before = delayed;
        a->Step(View(delayed), View(g), StepOptions{0.7f, 0.9f, 0.f, 2.f});
        for (int64_t i = 0; i < n; ++i) mean[i] += 2.f * g[i] / delay;
        if (k < delay - 1) {  // the gradient itself at once, at the rate / delay
          for (int64_t i = 0; i < n; ++i)
            ASSERT_NEAR(delayed[i], before[i] - 0.7f * 2.f * g[i] / delay, 1e-5) << i;
        }
      }
      b->Step(View(once), View(mean), StepOptions{0.7f, 0.9f, 0.f, 1.f});
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(delayed[i], once[i], 1e-4) << "nesterov " << nesterov << " round " << round;
    }
  }
}

TEST(DelayedMomentumSgdTest, DelayOneIsNesterovSgd) {
  const int64_t n = 300;
  std::vector<float> pa = RandomVector(n, 4), pb = pa;
  auto a = MakeDelayedMomentumSgd(n, 1, true);
  auto b = MakeSgd(n, 0.f, true);
  for (int step = 0; step < 4; ++step) {
    std::vector<float> g = RandomVector(n, 600 + step);
    a->Step(View(pa), View(g), StepOptions{0.5f, 0.8f});
    b->Step(View(pb), View(g), StepOptions{0.5f, 0.8f});
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(pa[i], pb[i], 1e-5) << i;
}

TEST(SgdTest, ZeroMomentumIsPlainSgd) {
  std::vector<float> params = {1.f, 2.f};
  std::vector<float> grads = {1.f, -1.f};
  auto sgd = MakeSgd(2);
  for (int i = 0; i < 2; ++i) sgd->Step(View(params), View(grads), StepOptions{0.5f, 0.f});
  EXPECT_FLOAT_EQ(params[0], 0.f);
  EXPECT_FLOAT_EQ(params[1], 3.f);
}

TEST(SgdTest, MomentumAfterZeroMomentumStepsStartsFromZero) {
  // Zero-momentum steps keep no buffer: momentum turned on later starts from zero, and the
  // state saved meanwhile reads as zeros.
  std::vector<float> params = {1.f}, grads = {1.f};
  auto sgd = MakeSgd(1);
  sgd->Step(View(params), View(grads), StepOptions{1.f, 0.f});
  auto fresh = MakeSgd(1);
  std::vector<float> after_fresh_step = {0.f};
  fresh->Step(View(after_fresh_step), View(grads), StepOptions{1.f, 0.f});
  EXPECT_EQ(sgd->SaveState(), fresh->SaveState());
  auto loaded = MakeSgd(1);
  loaded->LoadState(sgd->SaveState());
  std::vector<float> loaded_params = params;
  sgd->Step(View(params), View(grads), StepOptions{1.f, 0.5f});  // u = 0.5 * 0 + 1
  loaded->Step(View(loaded_params), View(grads), StepOptions{1.f, 0.5f});
  EXPECT_FLOAT_EQ(params[0], -1.f);
  EXPECT_EQ(params, loaded_params);
}

TEST(OptimizerTest, StepAndCopyWritesTheUpdatedParameters) {
  // An odd size: blocks of the fused copy end mid-way.
  const int64_t n = 5003;
  for (auto make :
       {+[](int64_t k) { return MakeAdam(k, {}); }, +[](int64_t k) { return MakeSgd(k, 0.01f); }}) {
    auto fused = make(n), plain = make(n);
    std::vector<float> p1 = RandomVector(n, 5), p2 = p1, out(n, -1.f);
    for (int step = 0; step < 3; ++step) {
      std::vector<float> g = RandomVector(n, 500 + step);
      const StepOptions o{0.01f, 0.9f, 0.99f, 0.5f};
      fused->StepAndCopy(View(p1), View(g), o, out.data());
      plain->Step(View(p2), View(g), o);
      ASSERT_EQ(p1, p2) << fused->name() << " step " << step;
      ASSERT_EQ(out, p1) << fused->name() << " step " << step;
    }
  }
}

void ExpectSaveLoadContinuesIdentically(std::unique_ptr<Optimizer> a,
                                        std::unique_ptr<Optimizer> b) {
  const int64_t n = a->size();
  std::vector<float> pa = RandomVector(n, 3);
  StepOptions o{0.01f, 0.9f, 0.98f, 1.f};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> g = RandomVector(n, 300 + step);
    a->Step(View(pa), View(g), o);
  }
  const std::string state = a->SaveState();
  b->LoadState(state);
  EXPECT_EQ(b->steps(), 3);
  EXPECT_EQ(b->SaveState(), state);
  std::vector<float> pb = pa;
  for (int step = 0; step < 2; ++step) {
    std::vector<float> g = RandomVector(n, 400 + step);
    a->Step(View(pa), View(g), o);
    b->Step(View(pb), View(g), o);
  }
  EXPECT_EQ(pa, pb);
  EXPECT_EQ(a->SaveState(), b->SaveState());
}

TEST(OptimizerStateTest, AdamSaveLoadRoundTrip) {
  ExpectSaveLoadContinuesIdentically(MakeAdam(513, {}), MakeAdam(513, {}));
}

TEST(OptimizerStateTest, SgdSaveLoadRoundTrip) {
  ExpectSaveLoadContinuesIdentically(MakeSgd(513), MakeSgd(513));
}

TEST(OptimizerStateTest, DelayedMomentumSgdSaveLoadRoundTrip) {
  // Saved between two moves of the momentum: the buffer of the steps since travels too.
  ExpectSaveLoadContinuesIdentically(MakeDelayedMomentumSgd(513, 2, true),
                                     MakeDelayedMomentumSgd(513, 2, true));
}

TEST(OptimizerStateTest, LoadRejectsOtherKindSizeAndTruncation) {
  auto adam = MakeAdam(10, {});
  const std::string state = adam->SaveState();
  EXPECT_THROW(MakeSgd(10)->LoadState(state), Error);
  EXPECT_THROW(MakeAdam(11, {})->LoadState(state), Error);
  EXPECT_THROW(MakeAdam(10, {})->LoadState(state.substr(0, state.size() - 1)), Error);
  EXPECT_THROW(MakeAdam(10, {})->LoadState("junk"), Error);
  EXPECT_NO_THROW(MakeAdam(10, {})->LoadState(state));
}

TEST(OptimizerFactoryTest, BuildsFromConfig) {
  config::OptimConfig c;
  c.set_optimizer("sgd");
  EXPECT_STREQ(MakeOptimizer(c, 4)->name(), "sgd");
  c.set_optimizer("adam");
  EXPECT_STREQ(MakeOptimizer(c, 4)->name(), "adam");
  c.set_optimizer("adagrad");
  EXPECT_THROW(MakeOptimizer(c, 4), Error);
}

TEST(ClipTest, ScaleFromSquaredNorm) {
  EXPECT_FLOAT_EQ(ClipScale(25.0, 1.f), 0.2f);
  EXPECT_FLOAT_EQ(ClipScale(0.25, 1.f), 1.f);
  EXPECT_FLOAT_EQ(ClipScale(25.0, 0.f), 1.f);  // off
  EXPECT_FLOAT_EQ(ClipScale(0.0, 1.f), 1.f);
  EXPECT_FLOAT_EQ(ClipScale(INFINITY, 1.f), 0.f);
  EXPECT_FLOAT_EQ(ClipScale(NAN, 1.f), 0.f);
  EXPECT_FLOAT_EQ(ClipScale(NAN, 0.f), 0.f);  // not finite drops the update even with clipping off
}

TEST(ClipTest, ShardedSquaredNormsClipLikeTheWhole) {
  std::vector<float> g = {3.f, 0.f, 0.f, 4.f};
  Tensor whole = View(g);
  // Two "shards" sum their squared norms before clipping.
  const double sq = SquaredNorm(whole.Slice(0, 2)) + SquaredNorm(whole.Slice(2, 4));
  EXPECT_DOUBLE_EQ(sq, 25.0);
  EXPECT_FLOAT_EQ(ClipByGlobalNorm(whole, sq, 2.5f), 0.5f);
  EXPECT_FLOAT_EQ(g[0], 1.5f);
  EXPECT_FLOAT_EQ(g[3], 2.f);
}

}  // namespace
}  // namespace tern::optim
