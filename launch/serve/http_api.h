// tern-serve's HTTP API over cpp-httplib (Debian 12's libcpp-httplib-dev): the endpoints, the
// bearer token, the error answers (one JSON line {"error": "..."} naming what is wrong), the
// request metrics. The translation work is the serving core's (inference/serve/): a handler
// parses the body (json_request.h), submits to the model's scheduler and waits for the answer,
// its deadline, or its client leaving (PeerWatch).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "inference/serve/metrics.h"
#include "inference/serve/scheduler.h"
#include "launch/serve/json_request.h"
#include "launch/serve/peer_socket.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tern::serve {

struct ApiOptions {
  std::string api_key;    // empty: no token asked (but POST /admin/reload's)
  std::string admin_key;  // POST /admin/reload's own token; empty: that endpoint is closed
  // The names a request's Host header may give (its port aside, lower case); empty: any. A
  // loopback server's default keeps pages that rebind a domain to 127.0.0.1 out.
  std::vector<std::string> allowed_hosts;
  double timeout_seconds = 30;  // a translation's deadline from its arrival
  size_t max_body_bytes = 1 << 20;
  RequestLimits limits;
  std::string version = "1";
};

class HttpApi {
 public:
  using Scheduler = inference::serve::Scheduler;
  // Loads the named model's file again and swaps it in: "" when done, else why not (the old
  // model keeps serving). Called from any thread; serializes reloads itself.
  using Reload = std::function<std::string(const std::string& name)>;

  HttpApi(const ApiOptions& options, inference::serve::ServeMetrics* metrics);

  // Until SetModels, translations get 503 and /ready says loading.
  void SetModels(std::map<std::string, Scheduler*> models, Reload reload);
  // From now on /ready and new translations get 503 (draining).
  void BeginDrain();
  // The endpoints, the token check, the error, exception and metrics hooks.
  void Register(httplib::Server* server);
  // Translation requests a scheduler accepted, and those answered 200 (the drain's account).
  int64_t accepted() const { return accepted_; }
  int64_t answered() const { return answered_; }

 private:
  enum State { kLoading, kReady, kDraining };
  void Translate(const httplib::Request& req, httplib::Response& res);
  void Models(httplib::Response& res) const;
  void AdminReload(const httplib::Request& req, httplib::Response& res);
  // Waits for the request's answer, its deadline or its client leaving; false (and `res` set)
  // when it ends without an answer.
  bool Await(const httplib::Request& req, inference::serve::Request& request,
             inference::serve::Clock::time_point deadline, httplib::Response& res);
  void Answer(const TranslateRequest& parsed, const std::string& model,
              const inference::serve::Request& request, httplib::Response& res);
  // Whether `req` carries `key` as its bearer token (true when `key` is empty).
  bool Authorized(const httplib::Request& req, const std::string& key) const;
  bool HostAllowed(const httplib::Request& req) const;

  const ApiOptions options_;
  inference::serve::ServeMetrics* metrics_;
  std::atomic<State> state_{kLoading};
  std::map<std::string, Scheduler*> models_;  // written once, before state_ becomes kReady
  Reload reload_;
  std::atomic<int64_t> accepted_{0}, answered_{0};
  PeerWatch peers_;  // the connections of requests that wait
};

// Sends {"error": message} with `status`.
void SendError(httplib::Response& res, int status, const std::string& message);

}  // namespace tern::serve
