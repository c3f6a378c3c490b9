#include "launch/serve/peer_socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tern::serve {
namespace {

int Port(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  (peer ? getpeername : getsockname)(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// A listening loopback socket and connections to it: the server's ends are what a handler of
// tern-serve watches.
class PeerSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(listener_, 64), 0);
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
    close(listener_);
  }
  // A connection: {client's fd, server's accepted fd}.
  std::pair<int, int> Connect() {
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(Port(listener_, false)));
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    const int server = accept(listener_, nullptr, nullptr);
    fds_.push_back(client);
    fds_.push_back(server);
    return {client, server};
  }
  int listener_ = -1;
  std::vector<int> fds_;
};

TEST_F(PeerSocketTest, AShutdownOfThePeersSendingSideCountsAsGone) {
  std::vector<std::pair<int, int>> connections;
  for (int i = 0; i < 8; ++i) connections.push_back(Connect());
  const auto [client, server] = connections[7];
  EXPECT_FALSE(PeerClosed(server));
  shutdown(client, SHUT_WR);
  EXPECT_TRUE(PeerClosed(server));
  EXPECT_FALSE(PeerClosed(connections[6].second));
}

// Counts on_close calls and waits for them.
struct Closes {
  std::mutex mutex;
  std::condition_variable changed;
  int count = 0;
  std::function<void()> Callback() {
    return [this] {
      std::lock_guard<std::mutex> lock(mutex);
      ++count;
      changed.notify_all();
    };
  }
  int Count() {
    std::lock_guard<std::mutex> lock(mutex);
    return count;
  }
  bool WaitFor(int n) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [&] { return count >= n; });
  }
};

TEST_F(PeerSocketTest, TheWatchCallsBackOnceWhenThePeerCloses) {
  PeerWatch watch;
  Closes closes;
  const auto [client, server] = Connect();
  const auto [client2, server2] = Connect();
  const uint64_t handle = watch.Watch(server, closes.Callback());
  const uint64_t handle2 = watch.Watch(server2, closes.Callback());
  ASSERT_NE(handle, 0u);
  ASSERT_NE(handle2, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(closes.Count(), 0);  // both peers are there
  close(client);
  fds_.erase(std::find(fds_.begin(), fds_.end(), client));
  ASSERT_TRUE(closes.WaitFor(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(closes.Count(), 1);  // once, and not for the other connection
  watch.Forget(handle);
  shutdown(client2, SHUT_WR);  // a client that stops sending has left too
  ASSERT_TRUE(closes.WaitFor(2));
  watch.Forget(handle2);
}

TEST_F(PeerSocketTest, APeerAlreadyGoneIsReportedAtOnce) {
  PeerWatch watch;
  Closes closes;
  const auto [client, server] = Connect();
  shutdown(client, SHUT_RDWR);
  const uint64_t handle = watch.Watch(server, closes.Callback());
  ASSERT_TRUE(closes.WaitFor(1));
  watch.Forget(handle);
}

TEST_F(PeerSocketTest, AForgottenConnectionIsNotCalledBack) {
  PeerWatch watch;
  Closes closes;
  const auto [client, server] = Connect();
  watch.Forget(watch.Watch(server, closes.Callback()));
  watch.Forget(0);  // nothing
  close(client);
  fds_.erase(std::find(fds_.begin(), fds_.end(), client));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(closes.Count(), 0);
}

TEST_F(PeerSocketTest, ADescriptorThatIsNotASocketIsRefused) {
  PeerWatch watch;
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(watch.Watch(fileno(file), [] {}), 0u);  // epoll refuses regular files: the caller polls
  std::fclose(file);
}

}  // namespace
}  // namespace tern::serve
