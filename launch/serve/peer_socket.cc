#include "launch/serve/peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

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

bool Matches(int fd, const std::string& local_addr, int local_port, const std::string& remote_addr,
             int remote_port) {
  sockaddr_storage local{}, remote{};
  socklen_t local_len = sizeof(local), remote_len = sizeof(remote);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) != 0) return false;
  std::string la, ra;
  int lp = 0, rp = 0;
  return Describe(local, &la, &lp) && Describe(remote, &ra, &rp) && lp == local_port &&
         rp == remote_port && la == local_addr && ra == remote_addr;
}

}  // namespace

int FindPeerSocket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port) {
  thread_local int cached = -1;
  if (cached >= 0 && Matches(cached, local_addr, local_port, remote_addr, remote_port)) {
    return cached;
  }
  cached = -1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (Matches(static_cast<int>(fd), local_addr, local_port, remote_addr, remote_port)) {
      cached = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
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
