// The seam between tern-serve's HTTP transport (http_server.h) and its endpoints (http_api.h): a
// request as read whole off a connection, and the answer a handler fills. Neither names the
// library that moves the bytes.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // the request line's target as sent: "/v1/models?x=1"
  std::string path;    // the target up to its '?' (not percent-decoded)
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case, in order
  std::string body;                                          // decoded from chunks when chunked
  // The connection's socket, for a handler that waits and wants to learn that its client left
  // (PeerWatch); -1 when there is none (the fuzzer). The handler must not read, write or close it.
  int socket = -1;

  // The first header of `name` (any case), or nullptr.
  const std::string* Header(std::string_view name) const;
  // Its value, or "" when absent.
  std::string HeaderValue(std::string_view name) const;
  bool HasHeader(std::string_view name) const { return Header(name) != nullptr; }
};

struct HttpResponse {
  int status = 200;
  std::string content_type;  // empty: none sent
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides type and length
  // The connection closes after this answer (set for errors that leave a request's bytes unread).
  bool close = false;

  void SetContent(std::string text, std::string type) {
    body = std::move(text);
    content_type = std::move(type);
  }
  void SetHeader(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
  }
};

}  // namespace tern::serve
