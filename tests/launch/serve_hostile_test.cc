// tern-serve as a program against hostile clients, on loopback with a tiny model:
//  - a crowd of idle and trickling connections: /health and translations answered beside it,
//    and a drain that ends within --drain-timeout whatever the crowd does;
//  - an unauthorized POST whose body comes after its headers: one answer, not two;
//  - reloads: a failed one keeps no descriptor, one asked while another runs is refused (409).
#include <dirent.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve_process.h"

namespace tern::serve {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ServerProcess;

class ServeHostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { files_ = new testing::ModelFiles(testing::MakeModelFiles()); }
  static void TearDownTestSuite() {
    testing::RemoveModelFiles(*files_);
    delete files_;
  }
  static inline testing::ModelFiles* files_ = nullptr;
};

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The process's open descriptors other than sockets (connections come and go with the test's
// clients): files, memfds, pipes, epoll and event descriptors.
int OpenFiles(pid_t pid) {
  const std::string dir_path = "/proc/" + std::to_string(pid) + "/fd";
  DIR* dir = opendir(dir_path.c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* entry = readdir(dir)) {
    char target[256] = {};
    const std::string link = dir_path + "/" + entry->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;  // "." and ".."
    n += std::string(target).rfind("socket:", 0) != 0;
  }
  closedir(dir);
  return n;
}

TEST_F(ServeHostileTest, ACrowdOfIdleAndTricklingConnectionsStarvesNothing) {
  ServerProcess server({"--model", "toy=" + files_->model, "--threads", "1", "--http-threads", "4",
                        "--read-timeout", "60", "--idle-timeout", "60", "--drain-timeout", "3"});
  ASSERT_TRUE(server.started());
  // 200 connections that send nothing and 200 that send half a header, then a byte a second.
  std::vector<int> idle, trickling;
  for (int i = 0; i < 200; ++i) {
    idle.push_back(testing::Connect(server.port()));
    trickling.push_back(testing::Connect(server.port()));
    ASSERT_GE(idle.back(), 0);
    ASSERT_GE(trickling.back(), 0);
    const std::string half = "POST /v1/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    send(trickling.back(), half.data(), half.size(), MSG_NOSIGNAL);
  }
  std::atomic<bool> trickle{true};
  std::thread trickler([&] {
    while (trickle) {
      for (int fd : trickling) send(fd, "a", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(200ms);
    }
  });
  httplib::Client client("127.0.0.1", server.port());
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    auto health = client.Get("/health");
    ASSERT_TRUE(health) << "no answer with 400 connections held open";
    EXPECT_EQ(health->status, 200);
    EXPECT_LT(Clock::now() - start, 1s);
  }
  auto res = client.Post("/v1/translate", testing::TranslateBody({files_->sentences[3]}),
                         "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  // The drain ends within its timeout though the crowd stays and trickles on.
  const auto start = Clock::now();
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(30s), 0) << server.Stderr();
  EXPECT_LT(Clock::now() - start, 10s);
  trickle = false;
  trickler.join();
  for (int fd : idle) close(fd);
  for (int fd : trickling) close(fd);
}

// With a token set, the 401 went out on the headers and the body, arriving a moment later, was
// read as a request of its own: two answers on one connection, which a proxy reusing
// connections could hand to another client.
TEST_F(ServeHostileTest, AnUnauthorizedPostWithADelayedBodyGetsOneAnswer) {
  const std::string key_file = files_->dir + "/hostile.key";
  { std::ofstream(key_file) << "s3cret\n"; }
  ServerProcess server({"--model", "toy=" + files_->model, "--api-key-file", key_file},
                       ServerProcess::kListening);
  ASSERT_TRUE(server.started());
  const std::string body = "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";  // looks like one
  const std::string request = testing::PostText("/v1/translate", body);
  const size_t header_end = request.find("\r\n\r\n") + 4;
  const int fd = testing::Connect(server.port());
  ASSERT_GE(fd, 0);
  send(fd, request.data(), header_end, MSG_NOSIGNAL);
  std::this_thread::sleep_for(300ms);
  send(fd, request.data() + header_end, request.size() - header_end, MSG_NOSIGNAL);
  const std::string got = testing::ReadFor(fd, 1500ms);
  close(fd);
  EXPECT_EQ(Count(got, "HTTP/1.1 "), 1) << got;
  EXPECT_EQ(got.rfind("HTTP/1.1 401", 0), 0u) << got;
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

TEST_F(ServeHostileTest, AFailedReloadKeepsNoDescriptorAndReloadsDoNotQueue) {
  const std::string admin_file = files_->dir + "/hostile-admin.key";
  { std::ofstream(admin_file) << "adm1n\n"; }
  const std::string path = files_->dir + "/hostile.tern";
  std::filesystem::copy_file(files_->model, path,
                             std::filesystem::copy_options::overwrite_existing);
  ServerProcess server({"--model", "toy=" + path, "--admin-key-file", admin_file});
  ASSERT_TRUE(server.started());
  httplib::Client admin("127.0.0.1", server.port());
  admin.set_read_timeout(60, 0);
  const httplib::Headers token = {{"Authorization", "Bearer adm1n"}};
  auto r = admin.Post("/admin/reload", token, "", "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  // The first failure may set up what failures share (the log, say): count after it.
  { std::ofstream(path, std::ios::trunc) << "not a model"; }
  r = admin.Post("/admin/reload", token, "", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500) << r->body;
  const int before = OpenFiles(server.pid());
  for (int i = 0; i < 5; ++i) {
    r = admin.Post("/admin/reload", token, "", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500) << r->body;
  }
  EXPECT_EQ(OpenFiles(server.pid()), before) << "a failed reload kept a descriptor";
  // Reloads asked at once: each one done or refused (409), none waiting behind another.
  std::filesystem::copy_file(files_->other, path,
                             std::filesystem::copy_options::overwrite_existing);
  std::atomic<int> done{0}, busy{0}, other{0};
  std::vector<std::thread> admins;
  for (int i = 0; i < 8; ++i) {
    admins.emplace_back([&] {
      httplib::Client c("127.0.0.1", server.port());
      c.set_read_timeout(60, 0);
      auto res = c.Post("/admin/reload", token, "", "application/json");
      if (res && res->status == 200) {
        ++done;
      } else if (res && res->status == 409 &&
                 res->body.find("a reload is running") != std::string::npos) {
        ++busy;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : admins) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_GE(done.load(), 1);
  auto models = nlohmann::json::parse(admin.Get("/v1/models")->body);
  EXPECT_EQ(models["models"][0]["generation"].get<int>(), 2 + done.load())
      << done.load() << " done, " << busy.load() << " refused";
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(), 0) << server.Stderr();
}

}  // namespace
}  // namespace tern::serve
