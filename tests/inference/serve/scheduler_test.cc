// The serving core's scheduler on tiny models: concurrent requests batch together and get their
// sentences' own translations in every batching mode, with one worker and with several; workers
// share one-sentence requests; the queue is bounded; cancelled requests
// leave the batch; a swap serves new requests with the new model while old ones finish on
// theirs; draining refuses new requests and finishes the accepted; stopping wakes every waiter.
#include "inference/serve/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "../letter_codec.h"
#include "../tiny_model.h"
#include "common/error.h"
#include "inference/translator.h"
#include "tensor/allocator.h"

namespace tern::inference::serve {
namespace {

using namespace std::chrono_literals;

struct Model {
  testing::TinyModel tiny;
  std::shared_ptr<LoadedModel> loaded;
};

TranslatorOptions Options(int beam, Device device = Device::kCpu) {
  TranslatorOptions options;
  options.search = {.beam_size = beam, .n_best = beam, .fused_output = true};
  options.device = device;
  return options;
}

std::unique_ptr<Model> MakeModel(uint32_t seed, int generation = 1, float eos_bias = 2.f,
                                 Device device = Device::kCpu) {
  auto m = std::make_unique<Model>();
  m->tiny = testing::MakeTinyModel({.eos_bias = eos_bias, .seed = seed});
  m->loaded = std::make_shared<LoadedModel>();
  m->loaded->translator =
      std::make_unique<Translator>(m->tiny.config.model(), m->tiny.weights,
                                   std::make_unique<testing::LetterCodec>(), Options(3, device));
  m->loaded->generation = generation;
  return m;
}

// What each line translates to alone, at `beam`, with the model's own weights.
std::string Alone(const Model& m, const std::string& line, int beam) {
  Translator t(m.tiny.config.model(), m.tiny.weights, std::make_unique<testing::LetterCodec>(),
               Options(beam));
  return t.Translate({line})[0][0].text;
}

std::string Text(const Request& r, size_t i) {
  if (r.hypotheses()[i].empty()) return "";
  return r.model().translator->codec().Decode(r.hypotheses()[i][0].tokens);
}

const std::vector<std::string> kLines = {
    "hello", "a much longer line of text", "abc", "xy", "another one", "q", "zzzz", "mnop", "rs",
    "tuvw"};

Scheduler::Submission SubmitOrFail(Scheduler& s, const std::vector<std::string>& texts,
                                   int beam = 3, int n_best = 1) {
  Scheduler::Submission sub = s.Submit(texts, beam, n_best);
  EXPECT_EQ(sub.status, Scheduler::Submission::kAccepted);
  return sub;
}

// Observations of the batch-size histogram at or below `le` ("+Inf": all of them).
uint64_t BatchesUpTo(ServeMetrics& metrics, const std::string& le) {
  const std::string text = metrics.Render();
  const std::string key = "tern_batch_sentences_bucket{model=\"tiny\",le=\"" + le + "\"} ";
  const size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + key.size()));
}

class BatchingModes : public ::testing::TestWithParam<std::tuple<Batching, int>> {};

TEST_P(BatchingModes, ConcurrentRequestsGetTheirSentencesOwnTranslations) {
  auto m = MakeModel(7);
  ServeMetrics metrics;
  const auto [batching, workers] = GetParam();
  Scheduler scheduler(
      "tiny", m->loaded,
      {.batching = batching, .max_batch_tokens = 64, .max_batch_sentences = 8, .workers = workers},
      &metrics);
  std::map<std::string, std::string> expected;
  for (const auto& line : kLines) expected[line] = Alone(*m, line, 3);
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 12; ++c) {
    clients.emplace_back([&, c] {
      for (int k = 0; k < 5; ++k) {
        // One-sentence requests mostly, a three-sentence one (with an empty line) now and then.
        std::vector<std::string> texts = {kLines[(c + k) % kLines.size()]};
        if ((c + k) % 4 == 0) texts = {kLines[c % kLines.size()], "", kLines[k]};
        Scheduler::Submission sub = SubmitOrFail(scheduler, texts);
        if (!sub.request) return;
        ASSERT_TRUE(sub.request->WaitUntil(Clock::now() + 60s));
        ASSERT_EQ(sub.request->cancelled(), Cancelled::kNo);
        for (size_t i = 0; i < texts.size(); ++i) {
          const std::string want = texts[i].empty() ? "" : expected[texts[i]];
          if (Text(*sub.request, i) != want) ++wrong;
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(scheduler.WaitIdle(Clock::now() + 10s));
  EXPECT_EQ(scheduler.queued_sentences(), 0);
  EXPECT_EQ(scheduler.queued_tokens(), 0);
  EXPECT_GT(metrics.Value("tern_decoder_steps_total", Labels({{"model", "tiny"}})), 0);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("tern_batch_sentences_bucket{model=\"tiny\",le=\"1\"}"), std::string::npos)
      << text;
}

INSTANTIATE_TEST_SUITE_P(Serve, BatchingModes,
                         ::testing::Combine(::testing::Values(Batching::kContinuous,
                                                              Batching::kStatic, Batching::kSerial),
                                            ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<std::tuple<Batching, int>>& info) {
                           const Batching b = std::get<0>(info.param);
                           return std::string(b == Batching::kContinuous ? "Continuous"
                                              : b == Batching::kStatic   ? "Static"
                                                                         : "Serial") +
                                  std::to_string(std::get<1>(info.param)) + "Workers";
                         });

TEST(SchedulerTest, WorkersShareOneSentenceRequests) {
  // Sentences that run to the length limit, so all four are running at once: with two workers
  // each batch holds at most its share, two of them, and both workers step.
  auto m = MakeModel(7, 1, -10.f);
  ServeMetrics metrics;
  Scheduler scheduler("tiny", m->loaded, {.max_batch_sentences = 16, .workers = 2}, &metrics);
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(SubmitOrFail(scheduler, {kLines[1]}).request);
  for (auto& r : requests) {
    ASSERT_TRUE(r->WaitUntil(Clock::now() + 60s));
    ASSERT_EQ(r->cancelled(), Cancelled::kNo);
    EXPECT_EQ(Text(*r, 0), Alone(*m, kLines[1], 3));
  }
  EXPECT_TRUE(scheduler.WaitIdle(Clock::now() + 10s));
  const uint64_t all = BatchesUpTo(metrics, "+Inf");
  EXPECT_GT(all, 0u);
  EXPECT_EQ(BatchesUpTo(metrics, "2"), all) << metrics.Render();
  // One worker's steps alone would be one sentence's; two workers' are more.
  const int tokens = static_cast<int>(testing::LetterCodec().Encode(kLines[1]).size()) + 1;
  const double steps = metrics.Value("tern_decoder_steps_total", Labels({{"model", "tiny"}}));
  EXPECT_GT(steps, 2 * tokens + 10) << "one worker decoded every sentence";
}

TEST(SchedulerTest, WorkersAreForTheCpu) {
  auto m = MakeModel(7);
  ServeMetrics metrics;
  EXPECT_THROW(Scheduler("tiny", m->loaded, {.workers = 0}, &metrics), tern::Error);
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  auto gpu = MakeModel(7, 1, 2.f, Device::kCuda);
  EXPECT_THROW(Scheduler("tiny", gpu->loaded, {.workers = 2}, &metrics), tern::Error);
}

TEST(SchedulerTest, CudaModelServesTheCpusTranslations) {
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  auto cpu = MakeModel(7), gpu = MakeModel(7, 1, 2.f, Device::kCuda);
  ASSERT_EQ(gpu->loaded->translator->model().device(), Device::kCuda);
  ServeMetrics metrics;
  Scheduler scheduler("tiny", gpu->loaded, {}, &metrics);
  std::vector<std::shared_ptr<Request>> requests;
  for (const auto& line : kLines) requests.push_back(SubmitOrFail(scheduler, {line}).request);
  for (size_t i = 0; i < kLines.size(); ++i) {
    ASSERT_TRUE(requests[i]->WaitUntil(Clock::now() + 60s));
    ASSERT_EQ(requests[i]->cancelled(), Cancelled::kNo);
    EXPECT_EQ(Text(*requests[i], 0), Alone(*cpu, kLines[i], 3)) << kLines[i];
  }
}

TEST(SchedulerTest, OneSentenceRequestsBatchWithEachOther) {
  // Every sentence runs to the length limit (eos never wins), so requests overlap in time.
  auto m = MakeModel(7, 1, -10.f);
  ServeMetrics metrics;
  Scheduler scheduler("tiny", m->loaded, {.max_batch_sentences = 16}, &metrics);
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 16; ++i) requests.push_back(SubmitOrFail(scheduler, {kLines[1]}).request);
  for (auto& r : requests) ASSERT_TRUE(r->WaitUntil(Clock::now() + 60s));
  // Steps with more than one sentence in the batch: fewer steps than 16 sentences alone take.
  const double steps = metrics.Value("tern_decoder_steps_total", Labels({{"model", "tiny"}}));
  const int tokens = static_cast<int>(testing::LetterCodec().Encode(kLines[1]).size()) + 1;
  const int one = 2 * tokens + 10;  // the length limit: each sentence's steps
  EXPECT_LT(steps, 16.0 * one / 2) << "one-sentence requests did not share the batch";
}

TEST(SchedulerTest, JoinNowWaitsForEnoughSentencesOrSteps) {
  const SchedulerOptions every;  // join_ratio 0: at every boundary
  EXPECT_TRUE(JoinNow(every, 10, 1, 0));
  EXPECT_FALSE(JoinNow(every, 10, 0, 100));  // nothing to join
  const SchedulerOptions half{.join_ratio = 0.5, .join_wait_steps = 20};
  EXPECT_TRUE(JoinNow(half, 0, 1, 0));    // an empty batch takes them at once
  EXPECT_FALSE(JoinNow(half, 10, 4, 0));  // 4 < 0.5 x 10
  EXPECT_TRUE(JoinNow(half, 10, 5, 0));
  EXPECT_FALSE(JoinNow(half, 10, 1, 19));
  EXPECT_TRUE(JoinNow(half, 10, 1, 20));  // waited long enough
}

TEST(SchedulerTest, AJoinRatioKeepsSentencesOutOfARunningBatchUntilItWaitedItsSteps) {
  // The first sentence runs to the length limit (eos never wins): 2 x 401 + 10 steps, long
  // enough for the second to arrive while it runs.
  const std::string very_long(400, 'k');
  for (const int wait_steps : {0, 1 << 20}) {
    auto m = MakeModel(7, 1, -10.f);
    ServeMetrics metrics;
    Scheduler scheduler("tiny", m->loaded,
                        {.max_batch_sentences = 16,
                         .max_sentence_tokens = 1000,
                         .join_ratio = 2,
                         .join_wait_steps = wait_steps},
                        &metrics);
    auto first = SubmitOrFail(scheduler, {very_long}).request;
    const std::string labels = Labels({{"model", "tiny"}});
    while (metrics.Value("tern_decoder_steps_total", labels) < 1) std::this_thread::yield();
    auto second = SubmitOrFail(scheduler, {kLines[1]}).request;
    ASSERT_TRUE(second->WaitUntil(Clock::now() + 60s));
    const bool first_done_before = first->WaitUntil(Clock::now());
    ASSERT_TRUE(first->WaitUntil(Clock::now() + 60s));
    // wait_steps 0: it joined the running batch at the next boundary (and finished long before
    // the first); else 1 < 2 x 1 kept it waiting until the first had finished.
    EXPECT_EQ(metrics.Value("tern_batch_joins_total", labels), wait_steps == 0 ? 1 : 0)
        << "join_wait_steps " << wait_steps;
    EXPECT_EQ(first_done_before, wait_steps != 0) << "join_wait_steps " << wait_steps;
  }
}

TEST(AdmissionPaceTest, ARunningSumOverTheWindow) {
  // A step every millisecond for 30 s, 3 tokens each: 3,000 tokens a second, the window holding
  // ten seconds of steps (about 10,000 entries), the older ones gone.
  AdmissionPace pace;
  const Clock::time_point start{};
  EXPECT_EQ(pace.tokens_per_second(), 0);
  for (int ms = 0; ms <= 30000; ++ms) pace.Add(start + std::chrono::milliseconds(ms), 3);
  EXPECT_NEAR(pace.tokens_per_second(), 3000.3, 0.5);  // 10,001 entries over 10 s
  EXPECT_LE(pace.entries(), 10001u);
  // Nothing admitted for 20 s more: the window empties of tokens and the pace falls to 0.
  for (int ms = 30001; ms <= 50000; ++ms) pace.Add(start + std::chrono::milliseconds(ms), 0);
  EXPECT_EQ(pace.tokens_per_second(), 0);
  // Under half a second of entries the last pace stands.
  AdmissionPace fresh;
  fresh.Add(start, 100);
  fresh.Add(start + std::chrono::milliseconds(400), 100);
  EXPECT_EQ(fresh.tokens_per_second(), 0);
  fresh.Add(start + std::chrono::milliseconds(1000), 100);
  EXPECT_NEAR(fresh.tokens_per_second(), 300, 1e-9);
}

TEST(SchedulerTest, TheQueueIsBoundedInTokens) {
  auto m = MakeModel(7, 1, -10.f);
  ServeMetrics metrics;
  Scheduler scheduler("tiny", m->loaded,
                      {.max_batch_sentences = 1, .max_queue_tokens = 40, .max_sentence_tokens = 30},
                      &metrics);
  // Larger than the whole queue: refused outright, never worth a retry.
  Scheduler::Submission big = scheduler.Submit({std::string(25, 'a'), std::string(25, 'b')}, 3, 1);
  EXPECT_EQ(big.status, Scheduler::Submission::kTooLarge);
  EXPECT_EQ(big.tokens, 52);
  Scheduler::Submission long_one = scheduler.Submit({"ok", std::string(40, 'c')}, 3, 1);
  EXPECT_EQ(long_one.status, Scheduler::Submission::kSentenceTooLong);
  EXPECT_EQ(long_one.sentence, 1u);
  std::vector<std::shared_ptr<Request>> accepted;
  int full = 0;
  for (int i = 0; i < 50; ++i) {
    Scheduler::Submission sub = scheduler.Submit({"abcdefghi"}, 3, 1);  // 10 tokens
    if (sub.status == Scheduler::Submission::kQueueFull) {
      ++full;
      EXPECT_GE(sub.retry_after_seconds, 1);
      EXPECT_LE(scheduler.queued_tokens(), 40);
    } else {
      ASSERT_EQ(sub.status, Scheduler::Submission::kAccepted);
      accepted.push_back(sub.request);
    }
  }
  EXPECT_GT(full, 0);
  for (auto& r : accepted) {
    ASSERT_TRUE(r->WaitUntil(Clock::now() + 60s));
    EXPECT_EQ(r->cancelled(), Cancelled::kNo);
  }
}

TEST(SchedulerTest, ACancelledRequestLeavesTheBatch) {
  auto m = MakeModel(7, 1, -10.f);  // runs to the length limit unless removed
  ServeMetrics metrics;
  Scheduler scheduler("tiny", m->loaded, {.max_sentence_tokens = 1000}, &metrics);
  const std::string very_long(400, 'k');  // 2 x 401 + 10 steps if it ran to the end
  auto waiting = SubmitOrFail(scheduler, {very_long, very_long}).request;
  std::this_thread::sleep_for(2ms);  // in the batch now, most likely
  waiting->Cancel(Cancelled::kClient);
  EXPECT_TRUE(waiting->WaitUntil(Clock::now() + 1s));
  EXPECT_TRUE(scheduler.WaitIdle(Clock::now() + 30s));
  const double steps = metrics.Value("tern_decoder_steps_total", Labels({{"model", "tiny"}}));
  EXPECT_LT(steps, 2 * 401 + 10) << "the cancelled sentences ran to the end";
  EXPECT_EQ(metrics.Value("tern_sentences_cancelled_total",
                          Labels({{"model", "tiny"}, {"reason", "client"}})),
            2);
  // The scheduler goes on serving.
  auto next = SubmitOrFail(scheduler, {"abc"}).request;
  EXPECT_TRUE(next->WaitUntil(Clock::now() + 30s));
  EXPECT_EQ(next->cancelled(), Cancelled::kNo);
}

// The scheduler looks for cancelled sentences only after a cancellation; each worker still finds
// the ones in the shared queue and in its own batch, however many steps passed in between.
TEST(SchedulerTest, CancelledRequestsLeaveTheQueueAndEveryWorkersBatch) {
  auto m = MakeModel(7, 1, -10.f);  // runs to the length limit unless removed
  ServeMetrics metrics;
  Scheduler scheduler("tiny", m->loaded,
                      {.max_batch_sentences = 1, .max_sentence_tokens = 1000, .workers = 2},
                      &metrics);
  const std::string very_long(400, 'k');
  auto first = SubmitOrFail(scheduler, {very_long}).request;
  auto second = SubmitOrFail(scheduler, {very_long}).request;
  auto third = SubmitOrFail(scheduler, {very_long}).request;  // waits: both batches are full
  const auto until = Clock::now() + 10s;
  while (scheduler.queued_sentences() != 1 && Clock::now() < until)
    std::this_thread::sleep_for(1ms);
  ASSERT_EQ(scheduler.queued_sentences(), 1);
  std::this_thread::sleep_for(2ms);  // steps without a cancellation
  third->Cancel(Cancelled::kClient);
  while (scheduler.queued_sentences() != 0 && Clock::now() < until)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(scheduler.queued_sentences(), 0) << "the cancelled sentence stayed in the queue";
  EXPECT_FALSE(first->answered());
  std::this_thread::sleep_for(2ms);
  first->Cancel(Cancelled::kDeadline);
  second->Cancel(Cancelled::kClient);
  EXPECT_TRUE(scheduler.WaitIdle(Clock::now() + 30s));
  const double steps = metrics.Value("tern_decoder_steps_total", Labels({{"model", "tiny"}}));
  EXPECT_LT(steps, 2 * (2 * 401 + 10)) << "the cancelled sentences ran to the end";
  EXPECT_EQ(metrics.Value("tern_sentences_cancelled_total",
                          Labels({{"model", "tiny"}, {"reason", "client"}})),
            2);
  EXPECT_EQ(metrics.Value("tern_sentences_cancelled_total",
                          Labels({{"model", "tiny"}, {"reason", "deadline"}})),
            1);
}

TEST(SchedulerTest, ASwapServesNewRequestsWithTheNewModelAndFinishesTheOld) {
  auto a = MakeModel(7, 1), b = MakeModel(11, 2);
  ServeMetrics metrics;
  Scheduler scheduler("tiny", a->loaded, {}, &metrics);
  std::map<std::string, std::string> want_a, want_b;
  for (const auto& line : kLines) {
    want_a[line] = Alone(*a, line, 3);
    want_b[line] = Alone(*b, line, 3);
  }
  std::atomic<bool> swapped{false};
  std::atomic<int> wrong{0}, after_swap_on_old{0}, on_new{0}, answered{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      // Until each client has sent four requests after the swap.
      for (int k = 0, after = 0; after < 4 && k < 100000; ++k) {
        const bool was_swapped = swapped.load();
        after += was_swapped;
        const std::string& line = kLines[(c * 3 + k) % kLines.size()];
        auto sub = SubmitOrFail(scheduler, {line, kLines[k % kLines.size()]});
        if (!sub.request) return;
        ASSERT_TRUE(sub.request->WaitUntil(Clock::now() + 60s));
        ASSERT_EQ(sub.request->cancelled(), Cancelled::kNo);
        const bool on_b = sub.request->model().generation == 2;
        on_new += on_b;
        if (was_swapped && !on_b) ++after_swap_on_old;
        auto& want = on_b ? want_b : want_a;
        if (Text(*sub.request, 0) != want[line] ||
            Text(*sub.request, 1) != want[kLines[k % kLines.size()]]) {
          ++wrong;
        }
        ++answered;
      }
    });
  }
  while (answered.load() < 20) std::this_thread::sleep_for(1ms);
  scheduler.Swap(b->loaded);
  swapped = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(wrong.load(), 0) << "a request mixed models or got another's translation";
  EXPECT_EQ(after_swap_on_old.load(), 0);
  EXPECT_GT(on_new.load(), 0);
  EXPECT_EQ(scheduler.current()->generation, 2);
}

TEST(SchedulerTest, DrainingRefusesNewRequestsAndFinishesTheAccepted) {
  auto m = MakeModel(7);
  ServeMetrics metrics;
  Scheduler scheduler("tiny", m->loaded, {}, &metrics);
  std::vector<std::shared_ptr<Request>> accepted;
  for (const auto& line : kLines) accepted.push_back(SubmitOrFail(scheduler, {line}).request);
  scheduler.Drain();
  EXPECT_EQ(scheduler.Submit({"late"}, 3, 1).status, Scheduler::Submission::kDraining);
  EXPECT_TRUE(scheduler.WaitIdle(Clock::now() + 30s));
  for (size_t i = 0; i < accepted.size(); ++i) {
    ASSERT_TRUE(accepted[i]->answered()) << "request " << i;
    EXPECT_EQ(Text(*accepted[i], 0), Alone(*m, kLines[i], 3));
  }
}

TEST(SchedulerTest, StoppingWakesEveryWaiter) {
  auto m = MakeModel(7, 1, -10.f);
  ServeMetrics metrics;
  auto scheduler = std::make_unique<Scheduler>(
      "tiny", m->loaded, SchedulerOptions{.max_batch_sentences = 1, .max_sentence_tokens = 1000},
      &metrics);
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back(SubmitOrFail(*scheduler, {std::string(300, 'x')}).request);
  }
  scheduler->Stop();
  for (auto& r : requests) {
    EXPECT_TRUE(r->WaitUntil(Clock::now() + 5s));
    EXPECT_TRUE(r->answered() || r->cancelled() == Cancelled::kShutdown);
  }
  EXPECT_EQ(scheduler->Submit({"x"}, 3, 1).status, Scheduler::Submission::kDraining);
}

TEST(SchedulerTest, BeamAndNBestPerRequest) {
  auto m = MakeModel(7);
  ServeMetrics metrics;
  Scheduler scheduler("tiny", m->loaded, {.max_beam = 5}, &metrics);
  auto one = SubmitOrFail(scheduler, {"hello", "abc"}, 1, 1).request;
  auto five = SubmitOrFail(scheduler, {"hello", "abc"}, 5, 4).request;
  ASSERT_TRUE(one->WaitUntil(Clock::now() + 30s));
  ASSERT_TRUE(five->WaitUntil(Clock::now() + 30s));
  EXPECT_EQ(Text(*one, 0), Alone(*m, "hello", 1));
  EXPECT_EQ(Text(*five, 1), Alone(*m, "abc", 5));
  EXPECT_EQ(one->hypotheses()[0].size(), 1u);
  EXPECT_EQ(five->hypotheses()[0].size(), 4u);
  EXPECT_GE(five->hypotheses()[0][0].normalized_score, five->hypotheses()[0][3].normalized_score);
}

TEST(SchedulerTest, ParsesBatchingNames) {
  EXPECT_EQ(ParseBatching("continuous"), Batching::kContinuous);
  EXPECT_EQ(ParseBatching("static"), Batching::kStatic);
  EXPECT_EQ(ParseBatching("serial"), Batching::kSerial);
  EXPECT_THROW(ParseBatching("dynamic"), tern::Error);
}

}  // namespace
}  // namespace tern::inference::serve
