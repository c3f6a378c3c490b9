#include "launch/serve/peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace tern::serve {
namespace {

// The address and port of a socket end as text ("127.0.0.1", 8080), or false.
bool Describe(const sockaddr_storage& a, std::string* addr, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &v4.sin_addr, buf, sizeof(buf));
    *port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &v6.sin6_addr, buf, sizeof(buf));
    *port = ntohs(v6.sin6_port);
  } else {
    return false;
  }
  *addr = buf;
  return true;
}

// A connected socket's two ends.
struct Ends {
  std::string local_addr;
  int local_port = 0;
  std::string remote_addr;
  int remote_port = 0;
  auto Key() const { return std::tie(remote_port, local_port, remote_addr, local_addr); }
  bool operator<(const Ends& o) const { return Key() < o.Key(); }
  bool operator==(const Ends& o) const { return Key() == o.Key(); }
};

bool EndsOf(int fd, Ends* ends) {
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0) return false;
  return Describe(local, &ends->local_addr, &ends->local_port) &&
         Describe(remote, &ends->remote_addr, &ends->remote_port);
}

bool Matches(int fd, const Ends& want) {
  Ends ends;
  return EndsOf(fd, &ends) && ends == want;
}

// Every connected socket the last scan of the descriptors saw, by its ends: the connections of a
// burst wait at once, and one scan then finds every one's (a scan each would be quadratic). An
// entry is checked before it is used: its descriptor may have been closed and reused since.
std::mutex seen_mutex;
std::map<Ends, int> seen;

}  // namespace

int FindPeerSocket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port) {
  const Ends want{local_addr, local_port, remote_addr, remote_port};
  thread_local int cached = -1;
  if (cached >= 0 && Matches(cached, want)) return cached;
  cached = -1;
  std::lock_guard<std::mutex> lock(seen_mutex);
  if (auto it = seen.find(want); it != seen.end() && Matches(it->second, want)) {
    cached = it->second;
    return cached;
  }
  seen.clear();
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    Ends ends;
    if (EndsOf(static_cast<int>(fd), &ends)) seen[ends] = static_cast<int>(fd);
  }
  closedir(dir);
  if (auto it = seen.find(want); it != seen.end()) cached = it->second;
  return cached;
}

bool PeerClosed(int fd) {
  pollfd p{};
  p.fd = fd;
  p.events = POLLRDHUP;
  if (poll(&p, 1, 0) < 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace tern::serve
