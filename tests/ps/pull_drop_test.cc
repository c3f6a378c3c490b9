// Dropped pulls (ps/pull_drop.h): a reply carries the entries furthest from the worker's view,
// the view follows what was sent, what is left out goes later, and a dense reply resyncs.
#include "ps/pull_drop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ps/protocol.h"
#include "tests/ps/test_vectors.h"

namespace tern::ps {
namespace {

TEST(PullDropTest, SendsTheEntriesFurthestFromTheWorkersView) {
  // 1,000 entries (under the sample size, so the quantile is exact): rate 0.9 sends the 100
  // largest differences, as the fresh values, and the view takes them.
  const int64_t n = 1000;
  const std::vector<float> init = testing::RandomVector(n, 1);
  std::vector<float> fresh = init;
  for (int64_t i = 0; i < n; ++i) fresh[i] += 0.001f * static_cast<float>(i % 997 + 1);
  PullDropper dropper(n, 2, 0.9f, 5);
  dropper.Init(init.data());
  SparseGradient sent;
  dropper.Select(1, fresh.data(), &sent);
  ASSERT_EQ(sent.indices.size(), sent.values.size());
  EXPECT_GE(sent.indices.size(), 100u);
  EXPECT_LE(sent.indices.size(), 101u);
  float smallest_sent = 1e9f;
  for (size_t k = 0; k < sent.indices.size(); ++k) {
    const int32_t i = sent.indices[k];
    if (k > 0) {
      EXPECT_LT(sent.indices[k - 1], i);
    }
    EXPECT_EQ(sent.values[k], fresh[i]);
    smallest_sent = std::min(smallest_sent, std::abs(fresh[i] - init[i]));
  }
  std::vector<float> view = init;
  for (size_t k = 0; k < sent.indices.size(); ++k) view[sent.indices[k]] = sent.values[k];
  EXPECT_EQ(dropper.view(1), view);
  EXPECT_EQ(dropper.view(0), init) << "another worker's view moved";
  for (int64_t i = 0; i < n; ++i) {
    if (view[i] != fresh[i]) {
      EXPECT_LE(std::abs(fresh[i] - init[i]), smallest_sent) << "a larger difference left out";
    }
  }
}

TEST(PullDropTest, WhatIsLeftOutGoesLaterAndNothingHeldIsResent) {
  const int64_t n = 20000;  // over the sample size: the quantile is estimated
  const std::vector<float> init = testing::RandomVector(n, 2);
  const std::vector<float> fresh = testing::RandomVector(n, 3);
  PullDropper dropper(n, 1, 0.99f, 7);
  dropper.Init(init.data());
  int64_t total = 0;
  for (int round = 0; round < 2000 && dropper.view(0) != fresh; ++round) {
    SparseGradient sent;
    dropper.Select(0, fresh.data(), &sent);
    total += static_cast<int64_t>(sent.indices.size());
  }
  EXPECT_EQ(dropper.view(0), fresh);
  EXPECT_EQ(total, n) << "each differing entry is sent exactly once";
  SparseGradient none;
  dropper.Select(0, fresh.data(), &none);
  EXPECT_TRUE(none.indices.empty()) << "entries the worker holds are sent again";
}

TEST(PullDropTest, ADenseReplyResyncsTheView) {
  const int64_t n = 64;
  const std::vector<float> init(n, 0.f), fresh = testing::RandomVector(n, 4);
  PullDropper dropper(n, 3, 0.5f, 1);
  dropper.Init(init.data());
  dropper.Resync(2, fresh.data());
  EXPECT_EQ(dropper.view(2), fresh);
  EXPECT_EQ(dropper.view(1), init);
}

TEST(PullDropTest, ASparseReplyRoundTripsThroughItsMessages) {
  SparseGradient g;
  g.indices = {0, 3, 9};
  g.values = {1.5f, -2.f, 7.25f};
  std::string header, payload;
  protocol::EncodeSparseReply(42, g, &header, &payload);
  ASSERT_EQ(header.size(), sizeof(protocol::SparseReplyHeader));
  EXPECT_NE(header.size(), protocol::kDenseReplyHeaderBytes);
  protocol::SparseReplyHeader h;
  std::memcpy(&h, header.data(), sizeof(h));
  EXPECT_EQ(h.version, 42u);
  EXPECT_EQ(h.count, 3);
  std::vector<float> out(10, 0.f);
  protocol::ApplySparseReplyPayload(payload, h.count, 10, out.data());
  EXPECT_EQ(out, (std::vector<float>{1.5f, 0, 0, -2.f, 0, 0, 0, 0, 0, 7.25f}));
  protocol::EncodeSparseReply(7, SparseGradient(), &header, &payload);
  EXPECT_TRUE(payload.empty());
}

}  // namespace
}  // namespace tern::ps
