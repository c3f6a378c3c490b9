// tern-serve's transport (launch/serve/http_server.h) with a stand-in handler: every bound of a
// request gets its status (AnswerBytes, no socket), and over loopback sockets a crowd of idle and
// trickling connections costs no handler thread, /health answers beside it, the connection
// limit turns the next one away, a trickling request meets its whole-request deadline, and a
// drain ends whatever a client does.
#include "launch/serve/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "raw_socket.h"

namespace tern::serve {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Answers "METHOD PATH BODY"; /slow waits until released (it runs on the handler pool).
class StandIn : public HttpHandler {
 public:
  void Handle(const HttpRequest& req, HttpResponse& res) override {
    if (req.path == "/slow") {
      std::unique_lock<std::mutex> lock(mutex_);
      ++waiting_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return released_; });
    }
    res.SetContent(req.method + " " + req.path + " " + req.body, "text/plain");
  }
  bool Quick(const HttpRequest& req) const override { return req.path != "/slow"; }
  void Refuse(const std::string&, int status, const std::string& message,
              HttpResponse& res) override {
    res.status = status;
    res.SetContent(message, "text/plain");
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }
  bool WaitForWaiting(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, 10s, [&] { return waiting_ >= n; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int waiting_ = 0;
  bool released_ = false;
};

// The status lines of a stream of responses, in order (every "HTTP/1.x NNN ": no body holds one).
std::vector<int> Statuses(const std::string& responses) {
  std::vector<int> statuses;
  for (size_t at = responses.find("HTTP/1."); at != std::string::npos;
       at = responses.find("HTTP/1.", at + 1)) {
    if (at + 13 <= responses.size() && responses[at + 8] == ' ' &&
        std::isdigit(static_cast<unsigned char>(responses[at + 9])) && responses[at + 12] == ' ') {
      statuses.push_back(std::atoi(responses.substr(at + 9, 3).c_str()));
    }
  }
  return statuses;
}

HttpServerOptions SmallLimits() {
  HttpServerOptions o;
  o.max_body_bytes = 100;
  o.max_target_bytes = 64;
  o.max_header_bytes = 1024;
  o.max_header_fields = 10;
  return o;
}

TEST(AnswerBytesTest, PipelinedRequestsAreAnsweredInOrder) {
  StandIn handler;
  const std::string out = AnswerBytes(
      SmallLimits(), &handler,
      "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /empty HTTP/1.1\r\nHost: x\r\n\r\n"  // no length, no chunks: an empty body
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
      "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  EXPECT_EQ(Statuses(out), (std::vector<int>{200, 200, 200, 200})) << out;
  EXPECT_NE(out.find("POST /empty "), std::string::npos);
  EXPECT_NE(out.find("GET /a "), std::string::npos);
  EXPECT_NE(out.find("POST /b hello"), std::string::npos);
  EXPECT_NE(out.find("POST /c abc"), std::string::npos);
}

TEST(AnswerBytesTest, EveryBoundHasItsStatusAndClosesTheConnection) {
  struct Case {
    std::string request;
    int status;
    bool ends_early = false;  // no request after it (its bytes end inside it)
  };
  const std::string after = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";  // never answered
  std::string many_fields = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 11; ++i) many_fields += "X-" + std::to_string(i) + ": 1\r\n";
  const std::vector<Case> cases = {
      {"GET /" + std::string(80, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
      {many_fields + "\r\n", 431},
      {"GET / HTTP/1.1\r\nX-Big: " + std::string(2000, 'b') + "\r\n\r\n", 431},
      {"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n" + std::string(101, 'c'), 413},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n70\r\n" + std::string(112, 'd') +
           "\r\n0\r\n\r\n",
       413},
      {"POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\nzz", 415},
      {"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", 400},
      {std::string("\x00\x01\x02 nonsense\r\n\r\n", 17), 400},
      {"GET / HTTP/9.9\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", 408, true},  // inside the body
      {"GET / HTTP/1.1\r\nHost: x\r\n", 408, true},                     // inside the header
  };
  StandIn handler;
  for (const Case& c : cases) {
    const std::string out =
        AnswerBytes(SmallLimits(), &handler, c.request + (c.ends_early ? "" : after));
    EXPECT_EQ(Statuses(out), std::vector<int>{c.status}) << c.request.substr(0, 80) << "\n" << out;
    EXPECT_NE(out.find("Connection: close"), std::string::npos) << out;
  }
}

TEST(AnswerBytesTest, ContinueIsSentBeforeTheBodyAndCloseEndsTheConnection) {
  StandIn handler;
  std::string out =
      AnswerBytes(SmallLimits(), &handler,
                  "POST /a HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(Statuses(out), (std::vector<int>{100, 200})) << out;
  out = AnswerBytes(SmallLimits(), &handler,
                    "GET /a HTTP/1.1\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\n\r\n");
  EXPECT_EQ(Statuses(out), std::vector<int>{200}) << out;
  out = AnswerBytes(SmallLimits(), &handler, "GET /a HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n");
  EXPECT_EQ(Statuses(out), std::vector<int>{200}) << "HTTP/1.0 closes by default: " << out;
}

// A loopback client socket.
int Connect(int port) {
  const int fd = testing::Connect(port);
  EXPECT_GE(fd, 0);
  return fd;
}

void Send(int fd, const std::string& bytes) {
  ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

std::string ReadAll(int fd, std::chrono::milliseconds timeout) {
  return testing::ReadFor(fd, timeout);
}

// One request on a fresh connection: its answer and how long it took.
std::pair<std::string, Clock::duration> Exchange(int port, const std::string& request) {
  const auto start = Clock::now();
  const int fd = Connect(port);
  Send(fd, request);
  std::string got = ReadAll(fd, 10s);
  close(fd);
  return {got, Clock::now() - start};
}

const char kHealth[] = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

TEST(HttpServerTest, ACrowdOfIdleAndTricklingConnectionsStarvesNothing) {
  StandIn handler;
  HttpServerOptions options;
  options.handler_threads = 2;
  options.idle_timeout = options.read_timeout = 30;  // the crowd stays for the whole test
  HttpServer server(options, &handler);
  const int port = server.Listen("127.0.0.1", 0);
  server.Start();
  // Both handler threads held by requests that wait.
  std::vector<int> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(Connect(port));
    Send(slow.back(), "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  ASSERT_TRUE(handler.WaitForWaiting(2));
  // 150 idle connections and 150 that sent half a header.
  std::vector<int> crowd;
  for (int i = 0; i < 300; ++i) {
    crowd.push_back(Connect(port));
    if (i % 2) Send(crowd.back(), "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Le");
  }
  for (int i = 0; i < 200 && server.open_connections() < 302; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(server.open_connections(), 302);
  for (int i = 0; i < 5; ++i) {
    const auto [answer, took] = Exchange(port, kHealth);
    EXPECT_EQ(Statuses(answer), std::vector<int>{200}) << answer;
    EXPECT_LT(took, 1s) << "with every handler busy and 300 connections open";
  }
  handler.Release();
  for (int fd : slow) EXPECT_EQ(Statuses(ReadAll(fd, 300ms)), std::vector<int>{200});
  for (int fd : slow) close(fd);
  for (int fd : crowd) close(fd);
  server.Stop();
}

TEST(HttpServerTest, TheConnectionLimitTurnsTheNextOneAway) {
  StandIn handler;
  HttpServerOptions options;
  options.max_connections = 4;
  HttpServer server(options, &handler);
  const int port = server.Listen("127.0.0.1", 0);
  server.Start();
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) held.push_back(Connect(port));
  for (int i = 0; i < 200 && server.open_connections() < 4; ++i) std::this_thread::sleep_for(5ms);
  const auto [refused, took] = Exchange(port, kHealth);
  EXPECT_EQ(Statuses(refused), std::vector<int>{503}) << refused;
  EXPECT_NE(refused.find("--max-connections"), std::string::npos);
  for (int fd : held) close(fd);
  for (int i = 0; i < 200 && server.open_connections() > 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(Statuses(Exchange(port, kHealth).first), std::vector<int>{200});
  server.Stop();
}

TEST(HttpServerTest, ATricklingRequestMeetsItsWholeRequestDeadline) {
  StandIn handler;
  HttpServerOptions options;
  options.read_timeout = 1;
  options.idle_timeout = 1;
  HttpServer server(options, &handler);
  const int port = server.Listen("127.0.0.1", 0);
  server.Start();
  // A byte every 100 ms would never be silent for a whole read timeout.
  const int fd = Connect(port);
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(60, 'p');
  const auto start = Clock::now();
  std::string got;
  for (size_t i = 0; i < request.size() && got.empty(); ++i) {
    if (send(fd, &request[i], 1, MSG_NOSIGNAL) != 1) break;
    got = ReadAll(fd, 100ms);
  }
  got += ReadAll(fd, 2s);
  EXPECT_EQ(Statuses(got), std::vector<int>{408}) << got;
  EXPECT_LT(Clock::now() - start, 3s);
  close(fd);
  // An idle connection is let go after the idle timeout.
  const int idle = Connect(port);
  const auto idle_start = Clock::now();
  EXPECT_EQ(ReadAll(idle, 5s), "");
  EXPECT_LT(Clock::now() - idle_start, 3s);
  close(idle);
  server.Stop();
}

TEST(HttpServerTest, TheDrainEndsWhateverAClientDoes) {
  StandIn handler;
  HttpServerOptions options;
  options.idle_timeout = options.read_timeout = 60;
  HttpServer server(options, &handler);
  const int port = server.Listen("127.0.0.1", 0);
  server.Start();
  const int trickler = Connect(port);
  Send(trickler, "GET /health HTTP/1.1\r\nHo");
  const int keeper = Connect(port);  // keep-alive, answered, then idle
  Send(keeper, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(Statuses(ReadAll(keeper, 300ms)), std::vector<int>{200});
  std::atomic<bool> trickling{true};
  std::thread trickle([&] {
    while (trickling) {
      send(trickler, "s", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(50ms);
    }
  });
  const auto start = Clock::now();
  server.StopAccepting();
  // The keep-alive client's next answer closes its connection.
  Send(keeper, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string last = ReadAll(keeper, 2s);
  EXPECT_EQ(Statuses(last), std::vector<int>{200});
  EXPECT_NE(last.find("Connection: close"), std::string::npos) << last;
  server.Stop();
  EXPECT_LT(Clock::now() - start, 5s);
  trickling = false;
  trickle.join();
  close(trickler);
  close(keeper);
}

}  // namespace
}  // namespace tern::serve
