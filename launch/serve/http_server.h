// tern-serve's HTTP/1.1 transport: one event loop (Boost.Beast over Asio) holds every connection
// and reads every request, so an idle or trickling client costs a socket and a few bytes, never a
// thread; only a whole, checked request reaches a handler. Requests that wait (translations) run
// on a pool of handler threads; quick ones (/health, /ready, /metrics, ...) are answered on the
// loop itself, so they answer while every handler thread waits on the model.
//
// What it bounds before buffering (HttpServerOptions): open connections (503 beyond), the time
// an idle connection is kept, the time a whole request's headers and body take to arrive (408),
// the request line's target (414), the header block and its field count (431), the body under
// any transfer coding (413); content codings are refused (415). A request with neither a length
// nor chunks has an empty body (RFC 9112 6.3), as `curl -X POST` sends.
// Every refusal closes its connection (lingering briefly so that the answer is not reset away).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "launch/serve/http_message.h"

namespace tern::serve {

struct HttpServerOptions {
  int handler_threads = 256;   // requests handled at once (a translation holds one while it waits)
  int max_connections = 4096;  // open connections; a further one gets 503 and is closed
  double idle_timeout = 5;     // a connection with no request begun is closed after this
  double read_timeout = 5;     // a request's headers and body arrive within this of its first byte
  double write_timeout = 30;   // a client must take its answer within this
  size_t max_body_bytes = 1 << 20;  // 413 beyond (decoded from chunks)
  size_t max_target_bytes = 8192;   // 414 beyond
  size_t max_header_bytes = 16384;  // the request line and headers together, 431 beyond
  size_t max_header_fields = 100;   // 431 beyond
};

// What the transport calls: the endpoints. Handle and Refuse must not throw.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Fills `res` for a whole request.
  virtual void Handle(const HttpRequest& req, HttpResponse& res) = 0;
  // True when Handle answers `req` without waiting on anything: it then runs on the event loop.
  virtual bool Quick(const HttpRequest& req) const = 0;
  // The answer to a request the transport refuses (`status`, `message` saying what to do);
  // `path` is the request's path when its header was read, else "".
  virtual void Refuse(const std::string& path, int status, const std::string& message,
                      HttpResponse& res) = 0;
};

class HttpServer {
 public:
  // `handler` must outlive the server.
  HttpServer(const HttpServerOptions& options, HttpHandler* handler);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: a free one) with a backlog of 1024; the port bound. tern::Error
  // naming the address when it cannot.
  int Listen(const std::string& host, int port);
  // Serves on a thread of its own (the event loop) and the handler pool.
  void Start();
  // The drain: no new connections, and every answer from now on closes its connection.
  void StopAccepting();
  // Waits for the handlers running (the caller makes them end: the schedulers' Stop answers what
  // waits) and for their answers' writes (2 s at most), then closes every connection and joins.
  void Stop();
  int open_connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// One connection's bytes read and answered as the server does, on this thread: each request in
// turn parsed and checked, answered by `handler`, until the bytes end or an answer closes the
// connection; the response bytes. Bytes that end inside a request get the 408 that the read
// deadline would give. For the HTTP fuzzer and the transport's unit tests.
std::string AnswerBytes(const HttpServerOptions& options, HttpHandler* handler,
                        std::string_view bytes);

}  // namespace tern::serve
