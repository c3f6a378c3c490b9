#include "launch/serve/peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "common/error.h"

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

PeerWatch::PeerWatch() {
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_ < 0 || wake_ < 0) Fail("tern-serve: cannot make an epoll set: ", std::strerror(errno));
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.u64 = 0;  // the stop signal; handles start at 1
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, wake_, &e) != 0) {
    Fail("tern-serve: cannot watch an eventfd: ", std::strerror(errno));
  }
  thread_ = std::thread([this] { Run(); });
}

PeerWatch::~PeerWatch() {
  const uint64_t one = 1;
  if (write(wake_, &one, sizeof(one)) != sizeof(one)) std::abort();
  thread_.join();
  close(wake_);
  close(epoll_);
}

uint64_t PeerWatch::Watch(int fd, std::function<void()> on_close) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t handle = next_++;
  epoll_event e{};
  // One-shot: a closed peer stays readable-at-end, which would report it again at every wait.
  e.events = EPOLLRDHUP | EPOLLONESHOT;  // EPOLLHUP and EPOLLERR are always reported
  e.data.u64 = handle;
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &e) != 0) return 0;
  watched_.emplace(handle, std::make_pair(fd, std::move(on_close)));
  return handle;
}

void PeerWatch::Forget(uint64_t handle) {
  if (handle == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = watched_.find(handle);
  if (it == watched_.end()) return;
  epoll_ctl(epoll_, EPOLL_CTL_DEL, it->second.first, nullptr);
  watched_.erase(it);
}

void PeerWatch::Run() {
  epoll_event events[64];
  for (;;) {
    const int n = epoll_wait(epoll_, events, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {  // not seen in practice: the handlers still end at their deadlines
      LOG(ERROR) << "tern-serve: waiting on client connections failed: " << std::strerror(errno)
                 << "; clients that leave are no longer noticed";
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == 0) return;
      // A handle forgotten since epoll_wait returned is gone from the map: nothing to call.
      const auto it = watched_.find(events[i].data.u64);
      if (it == watched_.end()) continue;
      // Under the lock, so that Forget waits for it; the entry stays until Forget.
      if (it->second.second) std::exchange(it->second.second, nullptr)();
    }
  }
}

}  // namespace tern::serve
