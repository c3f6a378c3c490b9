// tern-serve under load, on loopback with a tiny int16 model and a shortlist per sentence (so each
// sentence's translation is independent of its batch companions, docs/runtime.md):
//  - 200 concurrent clients for TERN_SERVE_SOAK_SECONDS (10 in CI, 30 for a longer soak), two
//    workers: every request answered, each sentence as tern-translate translates it alone;
//    memory bounded;
//  - SIGTERM under load: every request the server accepted is answered, then it exits 0;
//  - reloads under load (POST /admin/reload, SIGHUP), two workers: no request fails; a file that
//    fails to load leaves the old model serving; a new file serves new requests.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.h"

namespace tern::serve {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ServerProcess;

const std::string kFlags = "--beam 4 --shortlist-per-sentence";

// What the clients saw.
struct Tally {
  std::atomic<int64_t> ok{0}, wrong{0}, refused{0}, failed{0}, unavailable{0};
  std::string Describe() const {
    return "ok " + std::to_string(ok) + ", wrong " + std::to_string(wrong) + ", failed " +
           std::to_string(failed) + ", 503 " + std::to_string(unavailable) + ", transport " +
           std::to_string(refused);
  }
};

class ServeReliabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    files_ = new testing::ModelFiles(testing::MakeModelFiles());
    want_ = new std::vector<std::string>(
        testing::TranslateAlone(files_->model, files_->sentences, kFlags));
    want_other_ = new std::vector<std::string>(
        testing::TranslateAlone(files_->other, files_->sentences, kFlags));
  }
  static void TearDownTestSuite() {
    testing::RemoveModelFiles(*files_);
    delete files_;
    delete want_;
    delete want_other_;
  }

  // One client: requests of one sentence (three now and then) until `stop`, checking every answer
  // against `want` (or, with `want_either`, against either model's).
  static void Client(int port, int seed, const std::atomic<bool>& stop, Tally* tally,
                     const httplib::Headers& headers = {}, bool want_either = false) {
    httplib::Client client("127.0.0.1", port);
    client.set_read_timeout(60, 0);
    std::mt19937 rng(seed);
    const auto& sentences = files_->sentences;
    while (!stop) {
      std::vector<size_t> picked = {rng() % sentences.size()};
      if (rng() % 8 == 0) picked = {rng() % sentences.size(), rng() % sentences.size(), picked[0]};
      std::vector<std::string> lines;
      for (size_t i : picked) lines.push_back(sentences[i]);
      auto res =
          client.Post("/v1/translate", headers, testing::TranslateBody(lines), "application/json");
      if (!res) {
        if (tally->refused++ == 0 && !stop) {
          std::fprintf(stderr, "client %d: %s\n", seed, httplib::to_string(res.error()).c_str());
        }
        if (stop) return;
        std::this_thread::sleep_for(5ms);
        continue;
      }
      if (res->status == 503) {
        ++tally->unavailable;
        continue;
      }
      if (res->status != 200) {
        ++tally->failed;
        ADD_FAILURE() << "HTTP " << res->status << ": " << res->body;
        continue;
      }
      const auto got = nlohmann::json::parse(res->body)["translations"];
      bool right = got.size() == picked.size();
      for (size_t j = 0; right && j < picked.size(); ++j) {
        const std::string text = got[j]["text"];
        right = text == (*want_)[picked[j]] || (want_either && text == (*want_other_)[picked[j]]);
      }
      ++(right ? tally->ok : tally->wrong);
    }
  }

  static inline testing::ModelFiles* files_ = nullptr;
  static inline std::vector<std::string>* want_ = nullptr;
  static inline std::vector<std::string>* want_other_ = nullptr;
};

TEST_F(ServeReliabilityTest, TwoHundredClientsAreAnsweredCorrectlyInBoundedMemory) {
  const char* env = std::getenv("TERN_SERVE_SOAK_SECONDS");
  const int seconds = env != nullptr ? std::atoi(env) : 10;
  // Two workers: sentences spread over two batches must still get their answers alone.
  ServerProcess server({"--model", "toy=" + files_->model, "--threads", "1", "--workers", "2",
                        "--beam", "4", "--shortlist-per-sentence", "--http-threads", "256"});
  ASSERT_TRUE(server.started());
  std::atomic<bool> stop{false};
  Tally tally;
  std::vector<std::thread> clients;
  for (int c = 0; c < 200; ++c) {
    clients.emplace_back([&, c] { Client(server.port(), c, stop, &tally); });
  }
  // Resident memory, four times a second: the second half's peak against the first half's.
  std::vector<long> rss;
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(seconds)) {
    std::this_thread::sleep_for(250ms);
    rss.push_back(server.RssKb());
  }
  stop = true;
  for (auto& t : clients) t.join();
  std::printf("200 clients, %d s: %s; resident memory %ld kB at 1/4, %ld kB at the end\n", seconds,
              tally.Describe().c_str(), rss[rss.size() / 4], rss.back());
  EXPECT_EQ(tally.wrong, 0) << "answers differ from tern-translate's of each sentence alone";
  EXPECT_EQ(tally.failed, 0);
  EXPECT_EQ(tally.refused, 0) << "requests lost in transport";
  EXPECT_EQ(tally.unavailable, 0);
  EXPECT_GT(tally.ok, 200);
#if !defined(__SANITIZE_ADDRESS__)  // ASan's quarantine holds freed memory by design
  const size_t half = rss.size() / 2;
  const long first = *std::max_element(rss.begin(), rss.begin() + half);
  const long second = *std::max_element(rss.begin() + half, rss.end());
  EXPECT_LE(second, first + first / 4 + 32 * 1024) << "resident memory grew under steady load";
#endif
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

TEST_F(ServeReliabilityTest, SigtermAnswersEveryAcceptedRequestThenExitsZero) {
  ServerProcess server({"--model", "toy=" + files_->model, "--threads", "1", "--beam", "4",
                        "--shortlist-per-sentence"});
  ASSERT_TRUE(server.started());
  std::atomic<bool> stop{false};
  Tally tally;
  std::vector<std::thread> clients;
  for (int c = 0; c < 24; ++c) {
    clients.emplace_back([&, c] { Client(server.port(), 1000 + c, stop, &tally); });
  }
  std::this_thread::sleep_for(1500ms);
  server.Signal(SIGTERM);
  const int code = server.Wait(60s);
  stop = true;
  for (auto& t : clients) t.join();
  const std::string err = server.Stderr();
  EXPECT_EQ(code, 0) << err;
  EXPECT_EQ(tally.wrong, 0);
  EXPECT_EQ(tally.failed, 0);
  // The server's own account: every accepted request was answered 200, and the clients got them.
  const size_t at = err.find(" translation requests accepted, ");
  ASSERT_NE(at, std::string::npos) << err;
  const size_t line = err.rfind('\n', at) == std::string::npos ? 0 : err.rfind('\n', at) + 1;
  long long accepted = 0, answered = 0;
  ASSERT_EQ(std::sscanf(err.c_str() + line, "tern-serve: %lld translation requests accepted, %lld",
                        &accepted, &answered),
            2)
      << err;
  EXPECT_EQ(accepted, answered);
  EXPECT_EQ(tally.ok, answered) << tally.Describe();
  EXPECT_GT(answered, 0);
}

TEST_F(ServeReliabilityTest, ReloadsUnderLoadFailNoRequest) {
  const std::string key_file = files_->dir + "/reload.key";
  std::ofstream(key_file) << "k3y\n";
  const std::string admin_key_file = files_->dir + "/admin.key";
  std::ofstream(admin_key_file) << "adm1n\n";
  const std::string path = files_->dir + "/serving.tern";
  std::filesystem::copy_file(files_->model, path,
                             std::filesystem::copy_options::overwrite_existing);
  ServerProcess server(
      {"--model", "toy=" + path, "--threads", "1", "--workers", "2", "--beam", "4",
       "--shortlist-per-sentence", "--api-key-file", key_file, "--admin-key-file", admin_key_file},
      ServerProcess::kListening);
  ASSERT_TRUE(server.started());
  const httplib::Headers token = {{"Authorization", "Bearer k3y"}};
  const httplib::Headers admin_token = {{"Authorization", "Bearer adm1n"}};
  httplib::Client admin("127.0.0.1", server.port());
  admin.set_read_timeout(60, 0);
  for (int i = 0; i < 1000; ++i) {
    auto r = admin.Get("/ready", token);
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(20ms);
  }
  std::atomic<bool> stop{false};
  Tally tally;
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] { Client(server.port(), 2000 + c, stop, &tally, token); });
  }
  // The same file again, through the endpoint and through SIGHUP, while the clients run.
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(300ms);
    auto r = admin.Post("/admin/reload", admin_token, "", "application/json");
    ASSERT_TRUE(r) << server.Stderr();
    EXPECT_EQ(r->status, 200) << r->body;
    server.Signal(SIGHUP);
  }
  std::this_thread::sleep_for(300ms);
  // A broken file: refused, the old model serves on.
  { std::ofstream(path, std::ios::trunc) << "not a model"; }
  auto r = admin.Post("/admin/reload", admin_token, R"({"model": "toy"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("the model loaded before keeps serving"), std::string::npos) << r->body;
  std::this_thread::sleep_for(300ms);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(tally.wrong, 0);
  EXPECT_EQ(tally.failed, 0);
  EXPECT_EQ(tally.refused, 0);
  EXPECT_GT(tally.ok, 0);
  auto models = nlohmann::json::parse(admin.Get("/v1/models", token)->body);
  EXPECT_EQ(models["models"][0]["generation"], 7) << "1 + 3 reloads + 3 SIGHUPs";
  // A new file: new requests get its translations.
  std::filesystem::copy_file(files_->other, path,
                             std::filesystem::copy_options::overwrite_existing);
  r = admin.Post("/admin/reload", admin_token, "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  auto res = admin.Post("/v1/translate", token, testing::TranslateBody({files_->sentences[7]}),
                        "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(nlohmann::json::parse(res->body)["translations"][0]["text"], (*want_other_)[7]);
  auto metrics = admin.Get("/metrics", token);
  EXPECT_EQ(testing::MetricValue(metrics->body,
                                 R"(tern_model_reloads_total{model="toy",result="failed"})"),
            1);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

}  // namespace
}  // namespace tern::serve
