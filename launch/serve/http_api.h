// tern-serve's HTTP API, behind the transport's seam (http_server.h): the endpoints, the Host
// check, the bearer tokens, the error answers (one JSON line {"error": "..."} naming what is
// wrong, for every status), the request metrics. The translation work is the serving core's
// (inference/serve/): a handler parses the body (json_request.h), submits to the model's
// scheduler and waits for the answer, its deadline, or its client leaving (PeerWatch).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "inference/serve/metrics.h"
#include "inference/serve/scheduler.h"
#include "launch/serve/http_message.h"
#include "launch/serve/http_server.h"
#include "launch/serve/json_request.h"
#include "launch/serve/peer_socket.h"

namespace tern::serve {

struct ApiOptions {
  std::string api_key;    // empty: no token asked (but POST /admin/reload's)
  std::string admin_key;  // POST /admin/reload's own token; empty: that endpoint is closed
  // The names a request's Host header may give (its port aside, lower case); empty: any. A
  // loopback server's default keeps pages that rebind a domain to 127.0.0.1 out.
  std::vector<std::string> allowed_hosts;
  double timeout_seconds = 30;      // a translation's deadline from its arrival
  RequestLimits limits;
  std::string version = "1";
};

// What a reload of one model came to.
struct ReloadOutcome {
  enum Result { kDone, kBusy, kFailed };
  Result result = kDone;
  std::string message;  // kBusy, kFailed: why (the old model keeps serving)
};

class HttpApi : public HttpHandler {
 public:
  using Scheduler = inference::serve::Scheduler;
  // Loads the named model's file again and swaps it in. Called from any thread; one reload at a
  // time: another asked while one runs comes back kBusy at once.
  using Reload = std::function<ReloadOutcome(const std::string& name)>;

  HttpApi(const ApiOptions& options, inference::serve::ServeMetrics* metrics);

  // Until SetModels, translations get 503 and /ready says loading.
  void SetModels(std::map<std::string, Scheduler*> models, Reload reload);
  // From now on /ready and new translations get 503 (draining).
  void BeginDrain();
  // HttpHandler: the Host and token checks, the endpoints; an exception becomes a 500. Every
  // answer is counted in tern_requests_total by endpoint and status.
  void Handle(const HttpRequest& req, HttpResponse& res) override;
  // Everything but translations and reloads.
  bool Quick(const HttpRequest& req) const override;
  void Refuse(const std::string& path, int status, const std::string& message,
              HttpResponse& res) override;
  // Translation requests a scheduler accepted, and those answered 200 (the drain's account).
  int64_t accepted() const { return accepted_; }
  int64_t answered() const { return answered_; }

 private:
  enum State { kLoading, kReady, kDraining };
  void Route(const HttpRequest& req, HttpResponse& res);
  void Translate(const HttpRequest& req, HttpResponse& res);
  void Models(HttpResponse& res) const;
  void AdminReload(const HttpRequest& req, HttpResponse& res);
  // Waits for the request's answer, its deadline or its client leaving; false (and `res` set)
  // when it ends without an answer.
  bool Await(const HttpRequest& req, inference::serve::Request& request,
             inference::serve::Clock::time_point deadline, HttpResponse& res);
  void Answer(const TranslateRequest& parsed, const std::string& model,
              const inference::serve::Request& request, HttpResponse& res);
  // Whether `req` carries `key` as its bearer token (true when `key` is empty).
  bool Authorized(const HttpRequest& req, const std::string& key) const;
  bool HostAllowed(const HttpRequest& req) const;
  void Count(const std::string& path, int status);

  const ApiOptions options_;
  inference::serve::ServeMetrics* metrics_;
  std::atomic<State> state_{kLoading};
  std::map<std::string, Scheduler*> models_;  // written once, before state_ becomes kReady
  Reload reload_;
  std::atomic<int64_t> accepted_{0}, answered_{0};
  PeerWatch peers_;  // the connections of requests that wait
};

// Sends {"error": message} with `status`.
void SendError(HttpResponse& res, int status, const std::string& message);

}  // namespace tern::serve
