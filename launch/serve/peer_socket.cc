#include "launch/serve/peer_socket.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/error.h"

namespace tern::serve {

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
