// A client that disconnects while its translation runs gets its sentences cancelled. A handler
// that waits hands its connection's socket (HttpRequest::socket) to one PeerWatch, whose thread
// waits on every waiting connection at once (epoll) for the peer's close. The transport reads
// nothing from the socket and keeps it open while the handler runs (http_server.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace tern::serve {

// True when the peer has closed its side (FIN, RST or an error): poll with POLLRDHUP, no wait.
// A client that only shuts down its sending side while it waits counts as gone too.
bool PeerClosed(int fd);

// One thread waiting for the peers of many connections to close, so that a handler waiting for
// its translation sleeps until it is answered, its deadline or its client leaves, instead of
// waking every few milliseconds to poll its socket (a burst's backlog of waiting handlers made
// tens of context switches a request).
class PeerWatch {
 public:
  PeerWatch();  // Fails (tern::Error) when the epoll set or its thread cannot be made.
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // Calls `on_close` once, on the watch's thread, when the peer of connected socket `fd` closes
  // its side (FIN, RST, an error, or a shutdown of its sending side), at once if it already has.
  // Returns a handle for Forget, or 0 when the socket cannot be watched (the caller polls it).
  uint64_t Watch(int fd, std::function<void()> on_close);
  // Stops watching `handle`'s socket (0: nothing). Once it returns, its on_close is not running
  // and will not run, so the socket may be closed and what on_close uses may go.
  void Forget(uint64_t handle);

 private:
  void Run();

  int epoll_ = -1;
  int wake_ = -1;  // an eventfd that stops Run
  std::mutex mutex_;
  uint64_t next_ = 1;                                                  // GUARDED_BY(mutex_)
  std::map<uint64_t, std::pair<int, std::function<void()>>> watched_;  // GUARDED_BY(mutex_)
  std::thread thread_;
};

}  // namespace tern::serve
