#include "launch/serve/http_api.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "launch/serve/openapi.h"
#include "launch/serve/peer_socket.h"

namespace tern::serve {
namespace {

using inference::serve::Cancelled;
using inference::serve::Clock;
using inference::serve::Labels;
using nlohmann::json;

// The endpoints the request counter names; anything else counts as "other", so that a scan of
// random paths cannot grow the label set.
std::string EndpointLabel(const std::string& path) {
  for (const char* known : {"/v1/translate", "/v1/models", "/health", "/ready", "/metrics",
                            "/openapi.json", "/admin/reload"}) {
    if (path == known) return known;
  }
  return "other";
}

// A Host header's name without its port, in lower case: "LocalHost:8080" -> "localhost",
// "[::1]:8080" -> "::1".
std::string HostName(const std::string& host) {
  std::string name = host;
  if (!name.empty() && name.front() == '[') {
    const size_t close = name.find(']');
    name = close == std::string::npos ? name : name.substr(1, close - 1);
  } else {
    name = name.substr(0, name.find(':'));
  }
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

// Equal strings in time independent of where they differ (the token check).
bool SameSecret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i % std::max<size_t>(b.size(), 1)];
  return diff == 0;
}

int CountWords(const std::string& text) {
  int words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n';
    words += !space && !in_word;
    in_word = !space;
  }
  return words;
}

// An answer's JSON text. Strings may echo a client's bytes (a path, a parser's message quoting
// the body): invalid UTF-8 becomes U+FFFD instead of an exception outside every handler's try.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Whether the body says it is JSON: "application/json", any case, parameters allowed. A page's
// form can post text/plain or a form encoding to any address without asking; not JSON.
bool JsonBody(const HttpRequest& req) {
  std::string type = req.HeaderValue("content-type");
  type = type.substr(0, type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "application/json";
}

std::string Join(const std::map<std::string, inference::serve::Scheduler*>& models) {
  std::string names;
  for (const auto& [name, s] : models) names += (names.empty() ? "" : ", ") + name;
  return names;
}

}  // namespace

void SendError(HttpResponse& res, int status, const std::string& message) {
  res.status = status;
  res.SetContent(Dump(json{{"error", message}}) + "\n", "application/json");
}

HttpApi::HttpApi(const ApiOptions& options, inference::serve::ServeMetrics* metrics)
    : options_(options), metrics_(metrics) {
  metrics_->SetGauge("tern_ready", "", 0);
}

void HttpApi::SetModels(std::map<std::string, Scheduler*> models, Reload reload) {
  CHECK(state_ == kLoading);
  models_ = std::move(models);
  reload_ = std::move(reload);
  state_ = kReady;
  metrics_->SetGauge("tern_ready", "", 1);
}

void HttpApi::BeginDrain() {
  state_ = kDraining;
  metrics_->SetGauge("tern_ready", "", 0);
}

bool HttpApi::HostAllowed(const HttpRequest& req) const {
  // A request without a Host (HTTP/1.0) came from no browser page: nothing to rebind.
  const std::string* host = req.Header("host");
  if (options_.allowed_hosts.empty() || host == nullptr) return true;
  const std::string name = HostName(*host);
  return std::find(options_.allowed_hosts.begin(), options_.allowed_hosts.end(), name) !=
         options_.allowed_hosts.end();
}

bool HttpApi::Authorized(const HttpRequest& req, const std::string& key) const {
  if (key.empty()) return true;
  return SameSecret(req.HeaderValue("authorization"), "Bearer " + key);
}

void HttpApi::Count(const std::string& path, int status) {
  metrics_->AddCounter("tern_requests_total", Labels({{"endpoint", EndpointLabel(path)},
                                                      {"status", std::to_string(status)}}));
}

bool HttpApi::Quick(const HttpRequest& req) const {
  return !(req.method == "POST" && (req.path == "/v1/translate" || req.path == "/admin/reload"));
}

void HttpApi::Refuse(const std::string& path, int status, const std::string& message,
                     HttpResponse& res) {
  SendError(res, status, message);
  Count(path, status);
}

void HttpApi::Handle(const HttpRequest& req, HttpResponse& res) {
  try {
    Route(req, res);
  } catch (const std::exception& e) {
    LOG(ERROR) << "tern-serve: request failed: " << e.what();
    res = HttpResponse();
    SendError(res, 500, std::string("the server failed on this request: ") + e.what());
  } catch (...) {
    LOG(ERROR) << "tern-serve: request failed with an unknown exception";
    res = HttpResponse();
    SendError(res, 500, "the server failed on this request");
  }
  Count(req.path, res.status);
}

void HttpApi::Route(const HttpRequest& req, HttpResponse& res) {
  if (!HostAllowed(req)) {
    std::string names;
    for (const std::string& h : options_.allowed_hosts) names += (names.empty() ? "" : ", ") + h;
    return SendError(res, 421,
                     "Host '" + req.HeaderValue("host").substr(0, 256) +
                         "' is not a name this server answers to (" + names +
                         "); start tern-serve with --allowed-hosts to add one");
  }
  // The admin endpoint takes its own token, not the clients' (AdminReload: closed without one).
  const bool admin = req.path == "/admin/reload";
  if (req.path != "/health" && !Authorized(req, admin ? options_.admin_key : options_.api_key)) {
    res.SetHeader("WWW-Authenticate", "Bearer");
    return SendError(res, 401,
                     std::string("this ") + (admin ? "endpoint" : "server") +
                         " needs 'Authorization: Bearer TOKEN' (its " +
                         (admin ? "--admin-key-file" : "--api-key-file") + ")");
  }
  const bool get = req.method == "GET", post = req.method == "POST";
  const std::string& path = req.path;
  if (get && path == "/health") {
    res.SetContent("{\"status\":\"live\"}\n", "application/json");
  } else if (get && path == "/ready") {
    const State s = state_;
    if (s == kReady) {
      res.SetContent("{\"status\":\"ready\"}\n", "application/json");
    } else {
      SendError(res, 503, s == kLoading ? "loading the models" : "draining before shutdown");
    }
  } else if (get && path == "/v1/models") {
    Models(res);
  } else if (get && path == "/metrics") {
    res.SetContent(metrics_->Render(), "text/plain; version=0.0.4");
  } else if (get && path == "/openapi.json") {
    res.SetContent(OpenApiDocument(options_.version, options_.limits.max_beam), "application/json");
  } else if (post && path == "/v1/translate") {
    Translate(req, res);
  } else if (post && path == "/admin/reload") {
    AdminReload(req, res);
  } else if (EndpointLabel(path) != "other") {
    const bool posted = path == "/v1/translate" || path == "/admin/reload";
    res.SetHeader("Allow", posted ? "POST" : "GET");
    SendError(res, 405,
              "no endpoint " + req.method.substr(0, 16) + " " + path + "; it takes " +
                  (posted ? "POST" : "GET"));
  } else {
    SendError(res, 404,
              "no endpoint " + req.method.substr(0, 16) + " " + path.substr(0, 256) +
                  " (see GET /openapi.json)");
  }
}

void HttpApi::Models(HttpResponse& res) const {
  json models = json::array();
  if (state_ != kLoading) {
    for (const auto& [name, scheduler] : models_) {
      const auto model = scheduler->current();
      const auto& translator = *model->translator;
      models.push_back({{"name", name},
                        {"path", model->path},
                        {"arch", translator.model().config().arch()},
                        {"device", DeviceName(translator.model().device())},
                        {"generation", model->generation},
                        {"load_seconds", model->load_seconds},
                        {"queue_sentences", scheduler->queued_sentences()}});
    }
  }
  res.SetContent(Dump(json{{"models", models}}) + "\n", "application/json");
}

void HttpApi::Translate(const HttpRequest& req, HttpResponse& res) {
  const Clock::time_point arrival = Clock::now();
  const State state = state_;
  if (state != kReady) {
    res.SetHeader("Retry-After", "1");
    SendError(res, 503,
              state == kLoading ? "the server is loading its models; try again"
                                : "the server is draining before shutdown");
    return;
  }
  if (!JsonBody(req)) {
    return SendError(
        res, 415,
        "the body must be JSON, sent with 'Content-Type: application/json' (it came as '" +
            req.HeaderValue("content-type").substr(0, 64) + "')");
  }
  const ParsedRequest parsed = ParseTranslateRequest(req.body, options_.limits);
  if (!parsed.request) return SendError(res, 400, parsed.error);
  const TranslateRequest& r = *parsed.request;
  std::string name = r.model;
  if (name.empty()) {
    if (models_.size() != 1) {
      return SendError(res, 400, "field 'model' is missing; this server serves " + Join(models_));
    }
    name = models_.begin()->first;
  }
  const auto found = models_.find(name);
  if (found == models_.end()) {
    return SendError(res, 404,
                     "model '" + name + "' is not served here (models: " + Join(models_) + ")");
  }
  Scheduler& scheduler = *found->second;
  const int beam = r.beam > 0 ? r.beam : options_.limits.default_beam;
  Scheduler::Submission sub = scheduler.Submit(r.text, beam, r.n_best);
  const auto& limits = scheduler.options();
  switch (sub.status) {
    case Scheduler::Submission::kAccepted:
      ++accepted_;
      break;
    case Scheduler::Submission::kQueueFull:
      res.SetHeader("Retry-After", std::to_string(sub.retry_after_seconds));
      return SendError(res, 429,
                       "the queue of model '" + name + "' is full (" +
                           std::to_string(limits.max_queue_tokens) +
                           " tokens, --max-queue-tokens); retry after " +
                           std::to_string(sub.retry_after_seconds) + " s");
    case Scheduler::Submission::kTooLarge:
      return SendError(
          res, 413,
          "the request has " + std::to_string(sub.tokens) + " tokens, more than the queue holds (" +
              std::to_string(limits.max_queue_tokens) + ", --max-queue-tokens); split it");
    case Scheduler::Submission::kSentenceTooLong:
      return SendError(res, 400,
                       "text[" + std::to_string(sub.sentence) + "] has " +
                           std::to_string(sub.tokens) + " tokens; at most " +
                           std::to_string(limits.max_sentence_tokens) +
                           " a sentence (--max-sentence-tokens)");
    case Scheduler::Submission::kDraining:
      return SendError(res, 503, "the server is draining before shutdown");
  }
  const auto deadline = arrival + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options_.timeout_seconds));
  if (!Await(req, *sub.request, deadline, res)) return;
  Answer(r, name, *sub.request, res);
  ++answered_;
  metrics_->Observe("tern_request_seconds", Labels({{"model", name}}),
                    std::chrono::duration<double>(Clock::now() - arrival).count());
}

bool HttpApi::Await(const HttpRequest& req, inference::serve::Request& request,
                    Clock::time_point deadline, HttpResponse& res) {
  // The connection is watched only for a request that waits (most are answered sooner); then
  // the watch cancels the request if its client leaves, and this thread sleeps until the answer
  // or the deadline. A connection the watch cannot take is polled instead.
  constexpr auto kPoll = std::chrono::milliseconds(50);
  int fd = -1;
  bool looked = false;
  uint64_t watched = 0;
  struct Unwatch {
    PeerWatch& peers;
    const uint64_t& handle;
    ~Unwatch() { peers.Forget(handle); }
  } unwatch{peers_, watched};
  auto wake = [&] { return watched != 0 ? deadline : std::min(deadline, Clock::now() + kPoll); };
  while (!request.WaitUntil(wake())) {
    if (Clock::now() >= deadline) {
      request.Cancel(Cancelled::kDeadline);
      if (request.answered()) break;
      if (request.cancelled() == Cancelled::kDeadline) {
        SendError(res, 504,
                  "the translation passed its deadline of " +
                      std::to_string(options_.timeout_seconds) +
                      " s (--timeout); its sentences were cancelled");
        return false;
      }
      break;  // cancelled for another reason just before: answered below
    }
    if (!looked) {
      looked = true;
      fd = req.socket;
      if (fd >= 0) watched = peers_.Watch(fd, [&request] { request.Cancel(Cancelled::kClient); });
    }
    if (fd >= 0 && watched == 0 && PeerClosed(fd)) request.Cancel(Cancelled::kClient);
  }
  if (request.answered()) return true;
  switch (request.cancelled()) {
    case Cancelled::kClient:
      SendError(res, 499, "the client closed the connection; its sentences were cancelled");
      return false;
    case Cancelled::kFailed:
      SendError(res, 500, "the model failed while decoding this request (see the server's log)");
      return false;
    case Cancelled::kShutdown:
      SendError(res, 503, "the server stopped before this request was done");
      return false;
    default:
      SendError(res, 500, "the request ended unanswered");
      return false;
  }
}

void HttpApi::Answer(const TranslateRequest& r, const std::string& model,
                     const inference::serve::Request& request, HttpResponse& res) {
  const inference::TextCodec& codec = request.model().translator->codec();
  json translations = json::array();
  int words = 0;
  for (const auto& hyps : request.hypotheses()) {
    json alternatives = json::array();
    for (const inference::Hypothesis& h : hyps) {
      json one = {{"text", codec.Decode(h.tokens)}};
      if (r.scores) {
        one["score"] = h.score;
        one["normalized_score"] = h.normalized_score;
      }
      alternatives.push_back(std::move(one));
    }
    // An empty line, or a degenerate model that finished nothing: one empty translation.
    if (alternatives.empty()) {
      alternatives.push_back({{"text", ""}});
      if (r.scores) alternatives[0]["score"] = alternatives[0]["normalized_score"] = 0.0;
    }
    json translation = alternatives[0];
    words += CountWords(translation["text"].get_ref<const std::string&>());
    if (r.n_best > 1) translation["n_best"] = std::move(alternatives);
    translations.push_back(std::move(translation));
  }
  metrics_->AddWords(Labels({{"model", model}}), words);
  res.SetContent(Dump(json{{"model", model}, {"translations", std::move(translations)}}) + "\n",
                 "application/json");
}

void HttpApi::AdminReload(const HttpRequest& req, HttpResponse& res) {
  if (options_.admin_key.empty()) {
    return SendError(res, 403,
                     "POST /admin/reload needs a token of its own: start tern-serve with "
                     "--admin-key-file (or send the server SIGHUP)");
  }
  if (state_ != kReady)
    return SendError(res, 503, "the server is not serving (loading or draining)");
  std::vector<std::string> names;
  if (!req.body.empty()) {
    if (!JsonBody(req)) {
      return SendError(res, 415, "a body must be JSON, sent with 'Content-Type: application/json'");
    }
    const json body = json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("model") || !body["model"].is_string() ||
        body.size() != 1) {
      return SendError(res, 400, "the body must be empty (every model) or {\"model\": NAME}");
    }
    names.push_back(body["model"].get<std::string>());
    if (!models_.count(names[0])) {
      return SendError(
          res, 404, "model '" + names[0] + "' is not served here (models: " + Join(models_) + ")");
    }
  } else {
    for (const auto& [name, s] : models_) names.push_back(name);
  }
  json done = json::array();
  for (const std::string& name : names) {
    const ReloadOutcome outcome = reload_(name);
    if (outcome.result == ReloadOutcome::kBusy) {
      res.SetHeader("Retry-After", "1");
      return SendError(res, 409, outcome.message);
    }
    if (outcome.result == ReloadOutcome::kFailed) {
      return SendError(
          res, 500,
          "model '" + name + "': " + outcome.message + "; the model loaded before keeps serving");
    }
    done.push_back({{"name", name}, {"generation", models_.at(name)->current()->generation}});
  }
  res.SetContent(Dump(json{{"reloaded", done}}) + "\n", "application/json");
}

}  // namespace tern::serve
