// Sync SGD as DESIGN.md states it: N ranks step as one rank with their N batches together.
// ps/strategy_test.cc holds the strategy to the summed gradient; here the gradients come from a
// real Transformer through the trainer's loss (trainer/batch_gradients.h), so the division by
// every rank's target words and the model's independence of a sentence's batch-mates (and their
// padding) count too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>
#include <vector>

#include "comm/in_process.h"
#include "ps/strategy.h"
#include "tensor/arena.h"
#include "trainer/batch_gradients.h"

namespace tern::trainer {
namespace {

constexpr int kVocab = 31, kPad = 0, kBos = 2, kEos = 3;
constexpr int kRanks = 2, kSteps = 4;

struct Sentence {
  std::vector<int32_t> src, tgt;  // without bos and eos
};
using Sentences = std::vector<Sentence>;

// src + eos; tgt_in = bos + tgt; tgt_out = tgt + eos; padded with kPad to the longest.
models::BatchTensors MakeBatch(const Sentences& sentences) {
  const int64_t n = static_cast<int64_t>(sentences.size());
  size_t src_len = 0, tgt_len = 0;
  for (const Sentence& s : sentences) {
    src_len = std::max(src_len, s.src.size() + 1);
    tgt_len = std::max(tgt_len, s.tgt.size() + 1);
  }
  std::vector<int32_t> src(n * src_len, kPad), tgt_in(n * tgt_len, kPad),
      tgt_out(n * tgt_len, kPad);
  std::vector<float> mask(n * src_len, 0.f);
  for (int64_t b = 0; b < n; ++b) {
    const Sentence& s = sentences[b];
    for (size_t i = 0; i <= s.src.size(); ++i) {
      src[b * src_len + i] = i < s.src.size() ? s.src[i] : kEos;
      mask[b * src_len + i] = 1.f;
    }
    for (size_t i = 0; i <= s.tgt.size(); ++i) {
      tgt_in[b * tgt_len + i] = i == 0 ? kBos : s.tgt[i - 1];
      tgt_out[b * tgt_len + i] = i < s.tgt.size() ? s.tgt[i] : kEos;
    }
  }
  const int64_t sl = static_cast<int64_t>(src_len), tl = static_cast<int64_t>(tgt_len);
  models::BatchTensors batch;
  batch.src = Tensor::FromInts({n, sl}, src);
  batch.src_mask = Tensor::FromVector({n, sl}, mask);
  batch.tgt_in = Tensor::FromInts({n, tl}, tgt_in);
  batch.tgt_out = Tensor::FromInts({n, tl}, tgt_out);
  return batch;
}

float TargetWords(const Sentences& sentences) {
  float words = 0;
  for (const Sentence& s : sentences) words += static_cast<float>(s.tgt.size() + 1);  // + eos
  return words;
}

// batches[t][r]: rank r's sentences at update t. The ranks' batches differ in size and lengths.
std::vector<std::vector<Sentences>> RanksBatches() {
  std::mt19937 rng(7);
  auto words = [&](int n) {
    std::vector<int32_t> w(n);
    for (int32_t& id : w) id = 4 + static_cast<int32_t>(rng() % (kVocab - 4));
    return w;
  };
  std::vector<std::vector<Sentences>> batches(kSteps, std::vector<Sentences>(kRanks));
  for (int t = 0; t < kSteps; ++t) {
    for (int r = 0; r < kRanks; ++r) {
      for (int k = 0; k < 2 + r; ++k) {
        batches[t][r].push_back(
            {words(2 + static_cast<int>(rng() % 6)), words(1 + static_cast<int>(rng() % 7))});
      }
    }
  }
  return batches;
}

config::ModelConfig TinyTransformer() {
  config::ModelConfig mc;
  mc.set_arch("transformer");
  mc.set_emb_dim(16);
  mc.set_ffn_dim(32);
  mc.set_heads(2);
  mc.set_enc_depth(2);
  mc.set_dec_depth(2);
  mc.set_tied_embeddings(true);
  mc.set_pre_norm(true);
  mc.set_dropout(0.f);  // the one thing that would tell the ranks' steps from one rank's
  mc.set_ffn_activation("relu");
  mc.set_max_length(32);
  return mc;
}

// kSteps sync SGD updates of the tiny Transformer on batches[t].size() ranks; every rank's
// parameters at the end. words_of_every_rank: the trainer's sync loss (each rank divides by the
// words of all ranks' batches) or, to show what the test tells apart, each by its own.
std::vector<std::vector<float>> TrainSync(const std::vector<std::vector<Sentences>>& batches,
                                          bool words_of_every_rank) {
  const int ranks = static_cast<int>(batches[0].size());
  const std::unique_ptr<models::Model> model = models::CreateModel(TinyTransformer(), kVocab);
  std::vector<std::vector<float>> finals(ranks);
  std::mutex compute;  // one rank's forward and backward at a time: the BLAS is shared
  comm::RunInProcess(ranks, [&](comm::Communicator& comm) {
    graph::ParamStore params;
    model->AddParams(&params);
    params.Finalize(Device::kCpu, 11);
    config::OptimConfig optim;
    optim.set_optimizer("sgd");
    auto strategy =
        ps::MakeStrategy("sync", ps::StrategyOptions{}, optim, &comm, params.values_flat().numel());
    strategy->Init(params.values_flat());
    Arena arena;
    graph::Graph g(&arena, /*training=*/true);
    for (int t = 0; t < kSteps; ++t) {
      const Sentences& mine = batches[t][comm.rank()];
      float words = TargetWords(mine);
      if (words_of_every_rank) comm.AllReduceSum(Tensor(&words, Shape{1}));
      {
        std::lock_guard<std::mutex> lock(compute);
        g.Clear(static_cast<uint64_t>(t));
        BatchGradients(g, *model, params, MakeBatch(mine), 0.1f, words);
        arena.Reset();
      }
      ps::StepInfo info;
      info.update = t + 1;
      info.options.learning_rate = 0.5f;
      info.options.beta1 = 0.f;  // plain SGD: no amplification of float noise, unlike Adam's
      strategy->Step(params.grads_flat(), params.values_flat(), info);
    }
    strategy->Finish();
    finals[comm.rank()] = params.values_flat().ToVector();
  });
  return finals;
}

double MaxDifference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double most = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    most = std::max(most, static_cast<double>(std::abs(a[i] - b[i])));
  return most;
}

TEST(SyncBatchTest, TwoRanksStepAsOneRankWithBothBatchesTogether) {
  const std::vector<std::vector<Sentences>> ranks = RanksBatches();
  std::vector<std::vector<Sentences>> together(kSteps, std::vector<Sentences>(1));
  for (int t = 0; t < kSteps; ++t)
    for (const Sentences& s : ranks[t])
      together[t][0].insert(together[t][0].end(), s.begin(), s.end());
  const std::vector<float> one = TrainSync(together, true)[0];
  const std::vector<float> init = [&] {
    graph::ParamStore params;
    models::CreateModel(TinyTransformer(), kVocab)->AddParams(&params);
    params.Finalize(Device::kCpu, 11);
    return params.values_flat().ToVector();
  }();
  const double moved = MaxDifference(one, init);
  ASSERT_GT(moved, 1e-2) << "the updates barely moved the parameters: the test would see nothing";

  const std::vector<std::vector<float>> two = TrainSync(ranks, true);
  for (int r = 0; r < kRanks; ++r) {
    // Float32 sums in another order: the same to a few units in the last place.
    EXPECT_LT(MaxDifference(two[r], one), 2e-5) << "rank " << r;
  }
  // Each rank dividing by its own words instead is a different step, by far.
  const std::vector<std::vector<float>> own = TrainSync(ranks, false);
  EXPECT_GT(MaxDifference(own[0], one), 100 * 2e-5);
}

}  // namespace
}  // namespace tern::trainer
