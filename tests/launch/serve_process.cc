#include "serve_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "../inference/tiny_model.h"
#include "common/file_io.h"
#include "data/vocab.h"
#include "inference/format/export.h"
#include "inference/format/model_file.h"
#include "inference/tables/shortlist.h"

namespace tern::serve::testing {
namespace {

using Clock = std::chrono::steady_clock;

const char* kWords[] = {"the",  "house", "is",    "small", "green", "a",    "cat",   "sees", "dog",
                        "runs", "over",  "river", "we",    "walk",  "home", "today", "big",  "red"};

void WriteModel(const std::string& path, const data::Vocab& vocab, float eos_bias, uint32_t seed) {
  const inference::testing::TinyModel m = inference::testing::MakeTinyModel(
      {.vocab = vocab.size(), .eos_bias = eos_bias, .seed = seed, .emb_scale = 1.f});
  std::vector<inference::NamedTensor> tensors =
      inference::ConvertWeights(m.tensors, inference::WeightType::kInt16);
  // A shortlist: each source token's own id and two others, and the frequent few.
  const int64_t v = vocab.size();
  std::vector<std::vector<int32_t>> translations(v);
  for (int32_t s = 0; s < v; ++s) {
    translations[s] = {s, static_cast<int32_t>((s * 7 + 3) % v),
                       static_cast<int32_t>((s * 13 + 5) % v)};
  }
  const inference::Shortlist list(v, {1, 3, 4, 5, 6, 7, 8}, translations);
  for (auto& t : list.ToTensors()) tensors.push_back(t);
  inference::WriteModelFile(path, m.config, vocab.serialized(), tensors);
}

std::string Shell(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command;
  return out;
}

}  // namespace

ModelFiles MakeModelFiles() {
  ModelFiles f;
  f.dir =
      (std::filesystem::temp_directory_path() / ("tern_serve_test_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(f.dir);
  std::vector<std::string> corpus;
  for (int i = 0; i < 300; ++i) {
    std::string s;
    for (int j = 0; j < 3 + i % 5; ++j)
      s += std::string(j ? " " : "") + kWords[(i * 7 + j * 5) % 18];
    corpus.push_back(s);
  }
  data::VocabTrainOptions options;
  options.vocab_size = 48;
  const data::Vocab vocab = data::Vocab::TrainFromSentences(corpus, options);
  f.model = f.dir + "/model.tern";
  f.other = f.dir + "/other.tern";
  f.endless = f.dir + "/endless.tern";
  WriteModel(f.model, vocab, 2.5f, 7);
  WriteModel(f.other, vocab, 2.5f, 11);
  WriteModel(f.endless, vocab, -20.f, 7);
  for (int i = 0; i < 60; ++i) {
    std::string s;
    for (int j = 0; j < 1 + i % 12; ++j)
      s += std::string(j ? " " : "") + kWords[(i * 5 + j * 7) % 18];
    f.sentences.push_back(s);
  }
  return f;
}

void RemoveModelFiles(const ModelFiles& files) { std::filesystem::remove_all(files.dir); }

std::vector<std::string> TranslateAlone(const std::string& model,
                                        const std::vector<std::string>& lines,
                                        const std::string& flags) {
  const std::string in = model + ".in." + std::to_string(::getpid());
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  WriteFileAtomic(in, text);
  const std::string out = Shell(std::string(TERN_TRANSLATE_BIN) + " --model " + model +
                                " --max-batch-sentences 1 --threads 1 " + flags + " < " + in);
  std::filesystem::remove(in);
  std::vector<std::string> result;
  std::istringstream s(out);
  for (std::string line; std::getline(s, line);) result.push_back(line);
  EXPECT_EQ(result.size(), lines.size());
  return result;
}

ServerProcess::ServerProcess(const std::vector<std::string>& args, Expect expect,
                             const std::vector<std::string>& env) {
  int out[2];
  if (pipe(out) != 0) {
    ADD_FAILURE() << "pipe";
    return;
  }
  stderr_path_ = (std::filesystem::temp_directory_path() /
                  ("tern_serve_stderr_" + std::to_string(::getpid()) + "_" +
                   std::to_string(reinterpret_cast<uintptr_t>(this))))
                     .string();
  std::vector<std::string> argv_strings = {TERN_SERVE_BIN, "--listen", "127.0.0.1:0"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  pid_ = fork();
  if (pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    const int err = open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, STDERR_FILENO);
    close(out[0]);
    for (const std::string& setting : env) putenv(const_cast<char*>(setting.c_str()));
    std::vector<char*> argv;
    for (auto& a : argv_strings) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  // The first stdout line: "tern-serve: listening on http://127.0.0.1:PORT".
  std::string line;
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (line.find('\n') == std::string::npos && Clock::now() < until) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char c;
    if (read(out[0], &c, 1) != 1) break;
    line += c;
  }
  close(out[0]);
  const size_t colon = line.rfind(':');
  if (line.find("listening on http://127.0.0.1:") == std::string::npos || colon == line.npos) {
    if (expect != kAnything) ADD_FAILURE() << "tern-serve did not report its port: " << Stderr();
    return;
  }
  port_ = std::atoi(line.c_str() + colon + 1);
  if (expect != kReady) return;
  httplib::Client client("127.0.0.1", port_);
  while (Clock::now() < until) {
    auto res = client.Get("/ready");
    if (res && res->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "tern-serve never became ready; stderr: " << Stderr();
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!stderr_path_.empty()) std::filesystem::remove(stderr_path_);
}

void ServerProcess::Signal(int sig) const {
  if (pid_ > 0 && !exited_) kill(pid_, sig);
}

int ServerProcess::Wait(std::chrono::seconds timeout) {
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string ServerProcess::Stderr() const {
  std::ifstream in(stderr_path_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

long ServerProcess::RssKb() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return 0;
}

RawResponse RawExchange(int port, const std::string& request, size_t chunk,
                        std::chrono::milliseconds gap, std::chrono::seconds timeout) {
  RawResponse r;
  const int fd = Connect(port);
  if (fd < 0) return r;
  for (size_t i = 0; i < request.size(); i += chunk) {
    const size_t n = std::min(chunk, request.size() - i);
    if (send(fd, request.data() + i, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) break;
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
  }
  std::string in;
  const auto until = Clock::now() + timeout;
  while (Clock::now() < until) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    in.append(buf, n);
    // One response: the headers, then Content-Length bytes.
    const size_t end = in.find("\r\n\r\n");
    const size_t cl = in.find("Content-Length: ");
    if (end != in.npos && cl != in.npos && cl < end &&
        in.size() >= end + 4 + std::strtoul(in.c_str() + cl + 16, nullptr, 10)) {
      break;
    }
  }
  close(fd);
  if (in.rfind("HTTP/1.1 ", 0) == 0) r.status = std::atoi(in.c_str() + 9);
  if (const size_t end = in.find("\r\n\r\n"); end != in.npos) r.body = in.substr(end + 4);
  return r;
}

void SendAndLeave(int port, const std::string& request) {
  const int fd = Connect(port);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  close(fd);
}

std::string PostText(const std::string& path, const std::string& body,
                     const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

double MetricValue(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::atof(line.c_str() + series.size() + 1);
  }
  return 0;
}

std::string TranslateBody(const std::vector<std::string>& lines, const std::string& extra) {
  nlohmann::json body = {{"text", lines}};
  std::string text = body.dump();
  if (!extra.empty()) text = text.substr(0, text.size() - 1) + "," + extra + "}";
  return text;
}

}  // namespace tern::serve::testing
