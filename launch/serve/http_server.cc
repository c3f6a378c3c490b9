#include "launch/serve/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "common/error.h"
#include "common/logging.h"

namespace tern::serve {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Parser = http::request_parser<http::string_body>;
using Response = http::response<http::string_body>;

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

std::string Number(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", s);
  return text;
}

// A refusal: status 0 closes the connection without an answer (nobody is there to read one).
struct Refusal {
  int status = 0;
  std::string message;
};

void Configure(Parser& parser, const HttpServerOptions& o) {
  parser.header_limit(static_cast<std::uint32_t>(o.max_header_bytes));
  parser.body_limit(o.max_body_bytes);
}

// Why a read of a request begun failed, as an answer.
Refusal ReadFailure(const beast::error_code& ec, const HttpServerOptions& o) {
  if (ec == http::error::header_limit) {
    return {431, "the request line and headers are over " + std::to_string(o.max_header_bytes) +
                     " bytes; send fewer or shorter headers"};
  }
  if (ec == http::error::body_limit) {
    return {413, "the body is over the limit of " + std::to_string(o.max_body_bytes) +
                     " bytes (--max-body-bytes); split the request"};
  }
  if (ec == beast::error::timeout) {
    return {408, "the request did not arrive whole within " + Number(o.read_timeout) +
                     " s (--read-timeout)"};
  }
  if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == asio::error::operation_aborted || ec == asio::error::broken_pipe) {
    return {};
  }
  return {400, "the request is not HTTP/1.1 (" + ec.message() + ")"};
}

// The checks of a request's header, before its body is read.
Refusal CheckHeader(const Parser& parser, const HttpServerOptions& o) {
  const auto& m = parser.get();
  if (m.target().size() > o.max_target_bytes) {
    return {414, "the request target is over " + std::to_string(o.max_target_bytes) + " bytes"};
  }
  if (static_cast<size_t>(std::distance(m.begin(), m.end())) > o.max_header_fields) {
    return {431, "the request has over " + std::to_string(o.max_header_fields) + " headers"};
  }
  const auto coding = m[http::field::content_encoding];
  if (!coding.empty() && !beast::iequals(coding, "identity")) {
    return {415, "Content-Encoding '" + std::string(coding.substr(0, 64)) +
                     "' is not accepted; send the body uncompressed"};
  }
  return {};
}

bool ExpectsContinue(const Parser& parser) {
  return beast::iequals(parser.get()[http::field::expect], "100-continue");
}

// A request target's path: up to its '?', at most 1 KiB (it names the endpoint in the metrics).
std::string PathOf(beast::string_view target) {
  const std::string path(target.substr(0, 1024));
  return path.substr(0, path.find('?'));
}

HttpRequest ToRequest(http::request<http::string_body>&& m, int socket) {
  HttpRequest r;
  r.method = std::string(m.method_string());
  r.target = std::string(m.target());
  r.path = r.target.substr(0, r.target.find('?'));
  for (const auto& field : m) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  r.body = std::move(m.body());
  r.socket = socket;
  return r;
}

// Reason phrases Beast's table lacks.
const char* Reason(int status) {
  switch (status) {
    case 421:
      return "Misdirected Request";
    case 499:
      return "Client Closed Request";
    default:
      return nullptr;
  }
}

Response ToBeast(HttpResponse&& res, unsigned version, bool keep_alive) {
  Response m{static_cast<http::status>(res.status), version};
  if (const char* reason = Reason(res.status)) m.reason(reason);
  m.set(http::field::server, "tern-serve");
  if (!res.content_type.empty()) m.set(http::field::content_type, res.content_type);
  for (const auto& [name, value] : res.headers) m.set(name, value);
  m.body() = std::move(res.body);
  m.keep_alive(keep_alive);
  m.prepare_payload();
  return m;
}

std::string Serialize(const Response& m) {
  std::ostringstream out;
  out << m;
  return out.str();
}

HttpResponse Refused(HttpHandler* handler, const std::string& path, const Refusal& r) {
  HttpResponse res;
  handler->Refuse(path, r.status, r.message, res);
  res.close = true;
  return res;
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, HttpHandler* handler)
      : options(options), handler(handler), pool(std::max(1, options.handler_threads)) {}

  // Declared before the event loop's objects: the sessions its destructor frees count down.
  const HttpServerOptions options;
  HttpHandler* const handler;
  std::atomic<int> connections{0};
  std::atomic<int> writing{0};
  std::atomic<bool> draining{false};
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_pause{io};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  asio::thread_pool pool;
  std::thread loop;

  void Accept();
  void TurnAway(tcp::socket socket);
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl* server)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        server_(server),
        options_(server->options) {
    ++server_->connections;
  }
  ~Session() { --server_->connections; }

  void Start() { AwaitRequest(); }

 private:
  // Cancels the operation under way when `seconds` pass (its handler's Why() says timeout); a
  // new deadline replaces the last. The socket stays open, so a 408 can still be written.
  void Deadline(double seconds) {
    const uint64_t generation = ++deadline_;
    timed_out_ = false;
    timer_.expires_after(Seconds(seconds));
    timer_.async_wait([self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->deadline_) return;  // replaced or cancelled
      self->timed_out_ = true;
      beast::error_code ignored;
      self->socket_.cancel(ignored);
    });
  }
  void NoDeadline() {
    ++deadline_;
    timer_.cancel();
  }
  // An operation's error, with a cancellation by the deadline as beast::error::timeout.
  beast::error_code Why(beast::error_code ec) const {
    return ec == asio::error::operation_aborted && timed_out_ ? beast::error::timeout : ec;
  }

  // An idle connection waits for its next request's first bytes under the idle deadline; a
  // request begun (bytes buffered) goes on under the read deadline.
  void AwaitRequest() {
    parser_.emplace();
    Configure(*parser_, options_);
    path_.clear();
    if (buffer_.size() > 0) return ReadHeader();
    Deadline(options_.idle_timeout);
    socket_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();  // idle past its time, or gone
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    Deadline(options_.read_timeout);
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->Fail(self->Why(ec));
                              self->OnHeader();
                            });
  }

  void OnHeader() {
    path_ = PathOf(parser_->get().target());
    const Refusal refusal = CheckHeader(*parser_, options_);
    if (refusal.status != 0) return Send(Refused(server_->handler, path_, refusal), 11);
    if (!ExpectsContinue(*parser_) || parser_->is_done()) return ReadBody();
    interim_.emplace(http::status::continue_, parser_->get().version());
    http::async_write(socket_, *interim_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->Fail(self->Why(ec));
                        self->ReadBody();
                      });
  }

  void ReadBody() {
    if (parser_->is_done()) return Dispatch();
    http::async_read(socket_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->Fail(self->Why(ec));
                       self->Dispatch();
                     });
  }

  void Fail(const beast::error_code& ec) {
    const Refusal refusal = ReadFailure(ec, options_);
    if (refusal.status == 0) return Close();
    Send(Refused(server_->handler, path_, refusal), 11);
  }

  void Dispatch() {
    NoDeadline();
    const unsigned version = parser_->get().version();
    const bool keep_alive = parser_->get().keep_alive();
    request_ = ToRequest(parser_->release(), socket_.native_handle());
    // While draining every request is answered at once (503), here: a client sending request
    // after request cannot keep the handler pool, and so the drain, from ending.
    if (server_->draining.load() || server_->handler->Quick(request_)) {
      HttpResponse res;
      server_->handler->Handle(request_, res);
      return Send(std::move(res), version, keep_alive);
    }
    asio::post(server_->pool, [self = shared_from_this(), version, keep_alive] {
      HttpResponse res;
      self->server_->handler->Handle(self->request_, res);
      asio::post(self->socket_.get_executor(),
                 [self, version, keep_alive, res = std::move(res)]() mutable {
                   self->Send(std::move(res), version, keep_alive);
                 });
    });
  }

  void Send(HttpResponse res, unsigned version, bool keep_alive = false) {
    const bool close = res.close;
    response_ = ToBeast(std::move(res), version, keep_alive && !close && !server_->draining.load());
    Deadline(options_.write_timeout);
    ++server_->writing;
    http::async_write(socket_, response_,
                      [self = shared_from_this(), close](beast::error_code ec, size_t) {
                        --self->server_->writing;
                        if (ec) return self->Close();
                        if (close) return self->Linger();
                        if (!self->response_.keep_alive()) return self->Close();
                        self->AwaitRequest();
                      });
  }

  // After a refusal the client may still be sending: closing with its bytes unread would reset
  // the connection and could destroy the answer before it is read. Stop sending, read what comes
  // (1 MiB, 1 s at most), then close.
  void Linger() {
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_send, ec);
    buffer_.clear();
    Deadline(1.0);
    DrainInput(0);
  }

  void DrainInput(size_t read) {
    if (read > (1 << 20)) return Close();
    socket_.async_read_some(buffer_.prepare(16384),
                            [self = shared_from_this(), read](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();
                              self->DrainInput(read + n);
                            });
  }

  void Close() {
    NoDeadline();
    beast::error_code ec;
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  uint64_t deadline_ = 0;  // the generation of the deadline set last
  bool timed_out_ = false;
  HttpServer::Impl* const server_;
  const HttpServerOptions& options_;
  beast::flat_buffer buffer_;
  std::optional<Parser> parser_;
  std::string path_;  // of the request being read, once its header is
  HttpRequest request_;
  std::optional<http::response<http::empty_body>> interim_;  // 100 Continue
  Response response_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  // One thread runs the loop: the sessions need no strand.
  acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors or memory: the connections open may free some. Try again shortly.
      accept_pause.expires_after(std::chrono::milliseconds(50));
      accept_pause.async_wait([this](beast::error_code) {
        if (acceptor.is_open()) Accept();
      });
      return;
    }
    if (connections.load() >= options.max_connections) {
      TurnAway(std::move(socket));
    } else {
      std::make_shared<Session>(std::move(socket), this)->Start();
    }
    Accept();
  });
}

void HttpServer::Impl::TurnAway(tcp::socket socket) {
  // One try to hand over the short answer (it fits any send buffer), then close.
  HttpResponse res =
      Refused(handler, "",
              {503, "the server holds its limit of " + std::to_string(options.max_connections) +
                        " connections (--max-connections); try again"});
  res.SetHeader("Retry-After", "1");
  const std::string busy = Serialize(ToBeast(std::move(res), 11, false));
  beast::error_code ec;
  socket.non_blocking(true, ec);
  socket.write_some(asio::buffer(busy), ec);
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

HttpServer::HttpServer(const HttpServerOptions& options, HttpHandler* handler)
    : impl_(std::make_unique<Impl>(options, handler)) {
  if (options.max_connections < 1) Fail("--max-connections must be at least 1");
}

HttpServer::~HttpServer() { Stop(); }

int HttpServer::Listen(const std::string& host, int port) {
  beast::error_code ec;
  tcp::resolver resolver(impl_->io);
  const auto endpoints = resolver.resolve(
      host, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec) Fail("--listen ", host, ":", port, ": cannot resolve the host (", ec.message(), ")");
  tcp::acceptor& acceptor = impl_->acceptor;
  std::string why = "no address";
  for (const auto& entry : endpoints) {
    acceptor.close(ec);
    acceptor.open(entry.endpoint().protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(entry.endpoint(), ec);
    if (!ec) acceptor.listen(1024, ec);
    if (!ec) return acceptor.local_endpoint().port();
    why = ec.message();
  }
  acceptor.close(ec);
  Fail("--listen ", host, ":", port, ": cannot listen there (", why, ")");
}

void HttpServer::Start() {
  CHECK(impl_->acceptor.is_open()) << "HttpServer::Start before Listen";
  impl_->Accept();
  impl_->loop = std::thread([this] {
    // A handler that throws (out of memory) loses its connection, not the server.
    for (;;) {
      try {
        impl_->io.run();
        return;
      } catch (const std::exception& e) {
        LOG(ERROR) << "tern-serve: a connection failed: " << e.what();
      }
    }
  });
}

void HttpServer::StopAccepting() {
  impl_->draining = true;
  asio::post(impl_->io, [this] {
    beast::error_code ec;
    impl_->acceptor.close(ec);
    impl_->accept_pause.cancel();
  });
}

void HttpServer::Stop() {
  if (!impl_->loop.joinable()) return;
  StopAccepting();
  impl_->pool.join();
  for (int i = 0; i < 200 && impl_->writing.load() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->work.reset();
  impl_->io.stop();
  impl_->loop.join();
}

int HttpServer::open_connections() const { return impl_->connections.load(); }

std::string AnswerBytes(const HttpServerOptions& options, HttpHandler* handler,
                        std::string_view bytes) {
  std::string out;
  size_t at = 0;
  // Feeds the parser from `at` until `done` holds; a refusal when it cannot.
  const auto feed = [&](Parser& parser, auto done) -> Refusal {
    while (!done()) {
      beast::error_code ec;
      const size_t used = parser.put(asio::buffer(bytes.data() + at, bytes.size() - at), ec);
      at += used;
      if (ec == http::error::need_more || (!ec && used == 0)) {
        if (at < bytes.size() && used > 0) continue;
        // The bytes ended inside the request: what the read deadline gives.
        return ReadFailure(beast::error::timeout, options);
      }
      if (ec) return ReadFailure(ec, options);
    }
    return {};
  };
  while (at < bytes.size()) {
    Parser parser;
    Configure(parser, options);
    Refusal refusal = feed(parser, [&] { return parser.is_header_done(); });
    std::string path;
    if (refusal.status == 0 && parser.is_header_done()) {
      path = PathOf(parser.get().target());
      refusal = CheckHeader(parser, options);
      parser.eager(true);  // the body in as few calls as the bytes allow
      if (refusal.status == 0 && ExpectsContinue(parser) && !parser.is_done()) {
        out += Serialize(Response{http::status::continue_, parser.get().version()});
      }
      if (refusal.status == 0) refusal = feed(parser, [&] { return parser.is_done(); });
    }
    if (refusal.status != 0 || !parser.is_done()) {
      if (refusal.status != 0)
        out += Serialize(ToBeast(Refused(handler, path, refusal), 11, false));
      break;
    }
    const unsigned version = parser.get().version();
    const bool keep_alive = parser.get().keep_alive();
    HttpResponse res;
    handler->Handle(ToRequest(parser.release(), -1), res);
    const bool close = res.close || !keep_alive;
    out += Serialize(ToBeast(std::move(res), version, !close));
    if (close) break;
  }
  return out;
}

}  // namespace tern::serve
