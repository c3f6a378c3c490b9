#include "launch/serve/peer_socket.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>
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

// A listening loopback socket and connections to it: the server's ends are what
// FindPeerSocket looks for, as a handler of tern-serve does.
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
  int Find(int server) {
    return FindPeerSocket("127.0.0.1", Port(server, false), "127.0.0.1", Port(server, true));
  }
  int listener_ = -1;
  std::vector<int> fds_;
};

TEST_F(PeerSocketTest, EachHandlerFindsItsOwnConnectionAmongMany) {
  std::vector<std::pair<int, int>> connections;
  for (int i = 0; i < 40; ++i) connections.push_back(Connect());
  for (const auto& [client, server] : connections) EXPECT_EQ(Find(server), server);
  const auto [client, server] = connections[7];
  EXPECT_FALSE(PeerClosed(server));
  shutdown(client, SHUT_WR);
  EXPECT_TRUE(PeerClosed(server));
}

TEST_F(PeerSocketTest, AClosedConnectionsDescriptorIsNotTakenForIt) {
  auto [client, server] = Connect();
  ASSERT_EQ(Find(server), server);
  const int old_port = Port(server, true);
  const int local_port = Port(server, false);
  close(server);
  fds_.erase(std::find(fds_.begin(), fds_.end(), server));
  // The next connection may get the same descriptor number: found for its own ends only.
  const auto [client2, server2] = Connect();
  EXPECT_EQ(Find(server2), server2);
  EXPECT_EQ(FindPeerSocket("127.0.0.1", local_port, "127.0.0.1", old_port), -1);
}

}  // namespace
}  // namespace tern::serve
