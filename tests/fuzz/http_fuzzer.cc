// tern-serve's request handling from raw bytes: the transport's parsing and bounds
// (AnswerBytes, as a connection's bytes are read) into the API's routing, Host and token checks,
// body parsing and error answers (HttpApi, ready with no models, so every path but decoding
// runs). The rule: the output is a sequence of whole, valid HTTP responses, none a 500, each
// final one with a JSON or text body, and no more answers than requests could have been sent.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <string_view>

#include "inference/serve/metrics.h"
#include "launch/serve/http_api.h"
#include "launch/serve/http_server.h"

namespace {

using namespace tern::serve;
namespace http = boost::beast::http;

struct Harness {
  Harness() : api(Options(), &metrics) {
    api.SetModels({}, [](const std::string&) { return ReloadOutcome{}; });
    transport.max_body_bytes = 4096;
    transport.max_target_bytes = 256;
    transport.max_header_bytes = 2048;
    transport.max_header_fields = 16;
  }
  static ApiOptions Options() {
    ApiOptions o;
    o.api_key = "k";
    o.admin_key = "a";
    o.allowed_hosts = {"localhost", "127.0.0.1"};
    return o;
  }
  tern::inference::serve::ServeMetrics metrics;
  HttpApi api;
  HttpServerOptions transport;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* harness = new Harness();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string out = AnswerBytes(harness->transport, &harness->api, bytes);
  if (size > 0 && out.empty()) __builtin_trap();  // every request read or refused is answered
  size_t at = 0, finals = 0;
  while (at < out.size()) {
    http::response_parser<http::string_body> parser;
    parser.eager(true);
    boost::beast::error_code ec;
    at += parser.put(boost::asio::buffer(out.data() + at, out.size() - at), ec);
    if (ec || !parser.is_done()) __builtin_trap();  // not one whole, valid response
    const int status = parser.get().result_int();
    if (status == 500 || status < 100 || status > 599) __builtin_trap();
    if (status >= 200) {
      ++finals;
      if (parser.get().body().empty()) __builtin_trap();  // every answer says something
    }
  }
  // A request needs at least "M * HTTP/1.1\r\n\r\n"; a refusal may answer bytes that end early.
  if (finals > size / 16 + 1) __builtin_trap();
  return 0;
}
