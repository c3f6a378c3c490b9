// tern-serve as a program, on loopback with tiny models: the endpoints; every kind of bad request
// gets its status and one message and the server lives on; a client that leaves and a deadline
// that passes cancel their sentences; slow and stalled clients; the bearer token; bad flags.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "serve_process.h"

namespace tern::serve {
namespace {

using namespace std::chrono_literals;
using testing::ServerProcess;

class ServeProgramTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { files_ = new testing::ModelFiles(testing::MakeModelFiles()); }
  static void TearDownTestSuite() {
    testing::RemoveModelFiles(*files_);
    delete files_;
  }
  static std::vector<std::string> Flags() {
    return {"--threads", "1", "--beam", "4", "--shortlist-per-sentence"};
  }
  static std::vector<std::string> With(std::vector<std::string> a,
                                       const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  static inline testing::ModelFiles* files_ = nullptr;
};

TEST_F(ServeProgramTest, EndpointsAnswerAndTranslationsAreTernTranslates) {
  ServerProcess server(With({"--model", "toy=" + files_->model}, Flags()));
  ASSERT_TRUE(server.started());
  httplib::Client client("127.0.0.1", server.port());
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  const auto listed = nlohmann::json::parse(models->body);
  EXPECT_EQ(listed["models"][0]["name"], "toy");
  EXPECT_EQ(listed["models"][0]["generation"], 1);
  auto openapi = client.Get("/openapi.json");
  ASSERT_TRUE(openapi);
  EXPECT_TRUE(nlohmann::json::parse(openapi->body)["paths"].contains("/v1/translate"));

  const std::vector<std::string> lines(files_->sentences.begin(), files_->sentences.begin() + 12);
  const auto want =
      testing::TranslateAlone(files_->model, lines, "--beam 4 --shortlist-per-sentence");
  auto res = client.Post("/v1/translate", testing::TranslateBody(lines, R"("scores": true)"),
                         "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const auto answer = nlohmann::json::parse(res->body);
  EXPECT_EQ(answer["model"], "toy");
  ASSERT_EQ(answer["translations"].size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(answer["translations"][i]["text"], want[i]) << lines[i];
    EXPECT_TRUE(answer["translations"][i].contains("normalized_score"));
  }
  // n-best: every hypothesis, best first; the best is the text.
  res = client.Post("/v1/translate", testing::TranslateBody({lines[3]}, R"("n_best": 3)"),
                    "application/json");
  ASSERT_TRUE(res);
  const auto nbest = nlohmann::json::parse(res->body)["translations"][0];
  ASSERT_EQ(nbest["n_best"].size(), 3u);
  EXPECT_EQ(nbest["n_best"][0]["text"], nbest["text"]);
  // Counted once the answer is written, so perhaps after this client has read it.
  double counted = 0;
  std::string page;
  for (int i = 0; i < 250 && counted < 2; ++i) {
    auto metrics = client.Get("/metrics");
    ASSERT_TRUE(metrics);
    page = metrics->body;
    counted =
        testing::MetricValue(page, R"(tern_requests_total{endpoint="/v1/translate",status="200"})");
    if (counted < 2) std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(counted, 2);
  EXPECT_GT(testing::MetricValue(page, R"(tern_decoder_steps_total{model="toy"})"), 0);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

TEST_F(ServeProgramTest, BadRequestsGetTheirStatusAndOneMessage) {
  ServerProcess server(With({"--model", "toy=" + files_->model, "--max-body-bytes", "4096",
                             "--max-sentence-tokens", "40"},
                            Flags()));
  ASSERT_TRUE(server.started());
  struct Case {
    std::string request;
    int status;
    std::string message;  // a part of the error
  };
  const std::string long_sentence(200, 'a');
  std::string many_headers;
  for (int i = 0; i < 101; ++i) many_headers += "X-" + std::to_string(i) + ": 1\r\n";
  const std::vector<Case> cases = {
      {testing::PostText("/v1/translate", R"({"text": ["a", )"), 400,
       "not valid JSON (in text[1])"},
      {testing::PostText("/v1/translate", "{\"text\": [\"ok\", \"b\xff\"]}"), 400,
       "text[1] is not valid UTF-8"},
      {testing::PostText("/v1/translate", R"({"text": ["x"], "colour": 1})"), 400,
       "unknown field 'colour'"},
      {testing::PostText("/v1/translate", R"({"text": "x"})"), 400,
       "field 'text' must be an array of strings"},
      {testing::PostText("/v1/translate", R"({"text": ["x"], "model": "nope"})"), 404,
       "model 'nope' is not served here (models: toy)"},
      {testing::PostText("/v1/translate", R"({"text": ["x"], "beam": 99})"), 400, "field 'beam'"},
      {testing::PostText("/v1/translate", testing::TranslateBody({"a", long_sentence})), 400,
       "text[1] has"},
      {testing::PostText("/v1/translate", std::string(5000, ' ')), 413, "over the limit of 4096"},
      // No length and no chunks: an empty body (as curl -X POST sends), not JSON.
      {"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\r\n",
       400, "JSON"},
      {"GET /v2/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404,
       "no endpoint GET /v2/translate"},
      {"GET /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405, "it takes POST"},
      // Echoed bytes that are not UTF-8 (a path decoded to 0xFF, a parser's message quoting the
      // first byte of an é) once threw out of the answer's JSON text and ended the process.
      {"GET /%FF HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404, "no endpoint GET /%FF"},
      {"GET /\xFF HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404, "no endpoint GET /\xEF\xBF\xBD"},
      // A body must say it is JSON: a page's form posts text/plain or a form encoding anywhere
      // without asking, and curl -d sends a form encoding.
      {"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 14\r\n\r\n"
       "{\"text\": [\"\"]}",
       415, "Content-Type: application/json"},
      {"POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
       "Content-Length: 14\r\n\r\n{\"text\": [\"\"]}",
       415, "it came as 'text/plain'"},
      {testing::PostText("/v1/translate", "xx", "Content-Encoding: gzip\r\n"), 415,
       "Content-Encoding 'gzip' is not accepted"},
      // Every part of a request is bounded before it is buffered.
      {"GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 414,
       "the request target is over 8192 bytes"},
      {"GET /health HTTP/1.1\r\n" + many_headers + "\r\n", 431, "over 100 headers"},
      {"GET /health HTTP/1.1\r\nX: " + std::string(20000, 'y') + "\r\n\r\n", 431,
       "the request line and headers are over 16384 bytes"},
      {testing::PostText("/v1/translate", "{\"text\": \xC3\xA9}"), 400, "not valid JSON"},
      // A page whose domain was rebound to 127.0.0.1 reached /v1/models (file paths) and
      // translations: a loopback server answers only its loopback names.
      {"GET /v1/models HTTP/1.1\r\nHost: rebound.example:8080\r\n\r\n", 421,
       "Host 'rebound.example:8080' is not a name this server answers to"},
  };
  for (const Case& c : cases) {
    const testing::RawResponse r = testing::RawExchange(server.port(), c.request);
    EXPECT_EQ(r.status, c.status) << c.request << "\n" << r.body;
    const auto body = nlohmann::json::parse(r.body, nullptr, false);
    ASSERT_TRUE(body.is_object() && body.contains("error")) << r.body;
    EXPECT_NE(body["error"].get<std::string>().find(c.message), std::string::npos) << r.body;
    EXPECT_EQ(std::count(r.body.begin(), r.body.end(), '\n'), 1) << "one line: " << r.body;
  }
  // Its loopback names are answered, in any case, with or without a port.
  for (const char* host : {"LOCALHOST", "127.0.0.1:1", "[::1]:80"}) {
    const testing::RawResponse r = testing::RawExchange(
        server.port(), std::string("GET /health HTTP/1.1\r\nHost: ") + host + "\r\n\r\n");
    EXPECT_EQ(r.status, 200) << host << ": " << r.body;
  }
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Post("/v1/translate", testing::TranslateBody({"the cat"}), "application/json");
  ASSERT_TRUE(res) << "the server died";
  EXPECT_EQ(res->status, 200);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

TEST_F(ServeProgramTest, AClientThatLeavesOrADeadlineCancelsItsSentences) {
  // Every sentence of the endless model runs to its length limit: 100 x 30 + 10 steps.
  ServerProcess server(With({"--model", "endless=" + files_->endless, "--max-length-factor", "100",
                             "--max-sentence-tokens", "1000", "--timeout", "1"},
                            Flags()));
  ASSERT_TRUE(server.started());
  std::string sentence;
  for (int i = 0; i < 14; ++i) sentence += (i ? " " : "") + files_->sentences[i % 18].substr(0, 3);
  const std::vector<std::string> lines(8, sentence);
  testing::SendAndLeave(server.port(),
                        testing::PostText("/v1/translate", testing::TranslateBody(lines)));
  httplib::Client client("127.0.0.1", server.port());
  const std::string series = R"(tern_sentences_cancelled_total{model="endless",reason="client"})";
  double cancelled = 0;
  for (auto until = std::chrono::steady_clock::now() + 20s;
       cancelled < 8 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(50ms);
    auto m = client.Get("/metrics");
    ASSERT_TRUE(m);
    cancelled = testing::MetricValue(m->body, series);
  }
  EXPECT_EQ(cancelled, 8) << "the sentences of a client that left were not cancelled";
  // The deadline: 504 after about a second, and its sentences leave too.
  const auto start = std::chrono::steady_clock::now();
  auto res = client.Post("/v1/translate", testing::TranslateBody(lines), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 504) << res->body;
  EXPECT_NE(res->body.find("deadline"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  // The scheduler drops them at its next step boundary.
  double deadline_cancelled = 0;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       deadline_cancelled < 8 && std::chrono::steady_clock::now() < until;) {
    auto m = client.Get("/metrics");
    ASSERT_TRUE(m);
    deadline_cancelled = testing::MetricValue(
        m->body, R"(tern_sentences_cancelled_total{model="endless",reason="deadline"})");
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(deadline_cancelled, 8);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

TEST_F(ServeProgramTest, SlowClientsAreServedAndStalledOnesDropped) {
  ServerProcess server(With({"--model", "toy=" + files_->model, "--read-timeout", "1"}, Flags()));
  ASSERT_TRUE(server.started());
  const std::string line = files_->sentences[5];
  const auto want =
      testing::TranslateAlone(files_->model, {line}, "--beam 4 --shortlist-per-sentence");
  // A byte every 2 ms: slow, but never silent for a second.
  const testing::RawResponse slow = testing::RawExchange(
      server.port(), testing::PostText("/v1/translate", testing::TranslateBody({line})), 1, 2ms);
  ASSERT_EQ(slow.status, 200) << slow.body;
  EXPECT_EQ(nlohmann::json::parse(slow.body)["translations"][0]["text"], want[0]);
  // Half a request, then silence past the read timeout: the server lets the connection go.
  const std::string request = testing::PostText("/v1/translate", testing::TranslateBody({line}));
  const auto start = std::chrono::steady_clock::now();
  const testing::RawResponse stalled =
      testing::RawExchange(server.port(), request.substr(0, request.size() / 2), 1 << 20, 0ms, 20s);
  EXPECT_NE(stalled.status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << "a stalled client held the server";
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

TEST_F(ServeProgramTest, TheTokenGuardsEveryEndpointButHealth) {
  const std::string key_file = files_->dir + "/key";
  { std::ofstream(key_file) << "s3cret\n"; }
  ServerProcess server(With({"--model", "toy=" + files_->model, "--api-key-file", key_file}, {}),
                       ServerProcess::kListening);
  ASSERT_TRUE(server.started());
  httplib::Client client("127.0.0.1", server.port());
  for (int i = 0; i < 500; ++i) {  // ready: asked with the token
    auto r = client.Get("/ready", {{"Authorization", "Bearer s3cret"}});
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(20ms);
  }
  auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  for (const char* path : {"/v1/models", "/metrics", "/ready", "/openapi.json"}) {
    auto r = client.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
    EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
    r = client.Get(path, {{"Authorization", "Bearer wrong"}});
    EXPECT_EQ(r->status, 401) << path;
  }
  auto res = client.Post("/v1/translate", testing::TranslateBody({"the cat"}), "application/json");
  EXPECT_EQ(res->status, 401);
  res = client.Post("/v1/translate", {{"Authorization", "Bearer s3cret"}},
                    testing::TranslateBody({"the cat"}), "application/json");
  EXPECT_EQ(res->status, 200);
  // The clients' token does not open the admin endpoint: closed without --admin-key-file.
  res = client.Post("/admin/reload", {{"Authorization", "Bearer s3cret"}}, "", "application/json");
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(res->body.find("--admin-key-file"), std::string::npos) << res->body;
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();

  // Without any token, the admin endpoint is closed too (SIGHUP reloads).
  ServerProcess open(With({"--model", "toy=" + files_->model}, {}));
  ASSERT_TRUE(open.started());
  httplib::Client open_client("127.0.0.1", open.port());
  res = open_client.Post("/admin/reload", "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(res->body.find("--admin-key-file"), std::string::npos);
  open.Signal(SIGTERM);
  EXPECT_EQ(open.Wait(), 0);
}

// One token guarded translation and /admin/reload: any client could make the server load its
// models again (another copy held until their requests finish), as often as it liked.
TEST_F(ServeProgramTest, TheAdminTokenAloneOpensTheReloadEndpoint) {
  const std::string key_file = files_->dir + "/key", admin_file = files_->dir + "/admin";
  { std::ofstream(key_file) << "s3cret\n"; }
  { std::ofstream(admin_file) << "adm1n\n"; }
  ServerProcess server(With({"--model", "toy=" + files_->model, "--api-key-file", key_file,
                             "--admin-key-file", admin_file},
                            {}),
                       ServerProcess::kListening);
  ASSERT_TRUE(server.started());
  httplib::Client client("127.0.0.1", server.port());
  const httplib::Headers user = {{"Authorization", "Bearer s3cret"}},
                         admin = {{"Authorization", "Bearer adm1n"}};
  for (int i = 0; i < 500; ++i) {
    auto r = client.Get("/ready", user);
    if (r && r->status == 200) break;
    std::this_thread::sleep_for(20ms);
  }
  auto res = client.Post("/admin/reload", user, "", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_NE(res->body.find("--admin-key-file"), std::string::npos) << res->body;
  res = client.Post("/admin/reload", "", "application/json");
  EXPECT_EQ(res->status, 401);
  res = client.Get("/v1/models", admin);  // nor does the admin's token open the rest
  EXPECT_EQ(res->status, 401);
  res = client.Post("/admin/reload", admin, "", "application/json");
  EXPECT_EQ(res->status, 200) << res->body;
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

TEST_F(ServeProgramTest, DeviceCudaRunsTheGpuPath) {
  // On the emulated GPU (tensor/emulated_gpu.h): the decoder's GPU code path, every batch there.
  ServerProcess server(With({"--model", "toy=" + files_->model, "--device", "cuda"}, Flags()),
                       ServerProcess::kReady, {"TERN_EMULATE_GPU=1"});
  ASSERT_TRUE(server.started());
  httplib::Client client("127.0.0.1", server.port());
  auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(nlohmann::json::parse(models->body)["models"][0]["device"], "cuda");
  const std::vector<std::string> lines(files_->sentences.begin(), files_->sentences.begin() + 8);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (const std::string& line : lines) {
    clients.emplace_back([&, line] {
      httplib::Client c("127.0.0.1", server.port());
      auto res = c.Post("/v1/translate", testing::TranslateBody({line}), "application/json");
      ok +=
          res && res->status == 200 && nlohmann::json::parse(res->body)["translations"].size() == 1;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 8);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
  // Without a GPU (nor the emulated one), one line says so and the start fails.
  ServerProcess none(With({"--model", "toy=" + files_->model, "--device", "cuda"}, Flags()),
                     ServerProcess::kAnything, {"TERN_EMULATE_GPU=0"});
  const int code = none.Wait(30s);
  if (code == -1) {
    none.Signal(SIGTERM);
    GTEST_SKIP() << "a GPU is visible: the server serves on it";
  }
  EXPECT_NE(code, 0);
  EXPECT_NE(none.Stderr().find("tern-serve: error: --device cuda: no CUDA GPU is visible"),
            std::string::npos)
      << none.Stderr();
}

TEST_F(ServeProgramTest, BadFlagsAndFilesAreOneLineAndANonZeroExit) {
  const std::string same_key = files_->dir + "/same.key";
  { std::ofstream(same_key) << "same\n"; }
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--model", "toy=" + files_->dir + "/missing.tern"}, "missing.tern"},
      {{"--model", "toy=" + files_->model, "--batching", "dynamic"}, "--batching 'dynamic'"},
      {{"--model", "toy=" + files_->model, "--model", "toy=" + files_->other}, "given twice"},
      {{"--model", "toy=" + files_->model, "--max-queue-tokens", "10"}, "--max-queue-tokens"},
      {{"--model", "toy=" + files_->model, "--workers", "0"}, "--workers must be at least 1"},
      {{"--model", "toy=" + files_->model, "--workers", "2", "--threads", "2"}, "--threads 2"},
      {{"--model", "toy=" + files_->model, "--workers", "2", "--device", "cuda"},
       "--workers is for the CPU"},
      {{"--model", "toy=" + files_->model, "--api-key-file", files_->dir + "/none"},
       "--api-key-file"},
      {{"--model", "toy=" + files_->model, "--join-ratio", "-1"}, "--join-ratio needs a number"},
      {{"--model", "toy=" + files_->model, "--join-wait-steps", "x"}, "--join-wait-steps needs"},
      // Started, then answered every request above the runtime's 1024 with a 500.
      {{"--model", "toy=" + files_->model, "--max-beam", "5000"}, "--max-beam 5000 is outside 1"},
      {{"--model", "toy=" + files_->model, "--allowed-hosts", "a.example,b.example:80"},
       "'b.example:80' is not a host name"},
      {{"--model", "toy=" + files_->model, "--api-key-file", same_key, "--admin-key-file",
        same_key},
       "--admin-key-file holds the --api-key-file token"},
  };
  for (const Case& c : cases) {
    ServerProcess server(c.args, ServerProcess::kAnything);
    const int code = server.Wait(60s);
    EXPECT_NE(code, 0);
    const std::string err = server.Stderr();
    EXPECT_NE(err.find("tern-serve: error: "), std::string::npos) << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace tern::serve
