// tern-serve: serves exported models (.tern) over HTTP/1.1 with JSON, batching sentences across
// requests (continuous batching, inference/serve/). Links no MPI (docs/design.md rule 1).
//
//   tern-serve --model NAME=FILE.tern [--model ...] [--listen 127.0.0.1:8080] [--threads N]
//              [--device cpu|cuda] [tern-translate's runtime switches] [server options]
//
// Lifecycle: it listens first (/health answers, /ready says 503 while the models load), loads
// every model, then serves. SIGTERM or SIGINT: stop accepting, finish every accepted request
// within --drain-timeout, exit 0. SIGHUP or POST /admin/reload: load the files again beside the
// running models and swap them in; a file that fails to load leaves the old model serving.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/logging.h"
#include "common/timer.h"
#include "inference/search/beam_search.h"
#include "inference/serve/scheduler.h"
#include "launch/serve/http_api.h"
#include "launch/serve/http_server.h"
#include "launch/translate_flags.h"
#include "tensor/threads.h"

namespace tern {
namespace {

using inference::serve::Clock;
using inference::serve::LoadedModel;
using inference::serve::Scheduler;

int signal_pipe[2] = {-1, -1};  // the signal handler's numbers, for the main thread

constexpr char kUsage[] =
    "usage: tern-serve --model NAME=FILE.tern [--model ...] [options]\n"
    "Serves exported Tern models over HTTP (JSON), batching sentences across requests.\n"
    "  --model NAME=PATH       a model to serve under NAME (repeat for more; PATH alone:\n"
    "                          the file's name without .tern)\n"
    "  --listen HOST:PORT      where to listen (default 127.0.0.1:8080; port 0: any free\n"
    "                          port; the bound address is printed on stdout)\n"
    "  --batching MODE         continuous (default): sentences join the running batch at\n"
    "                          every decoder step; static: a batch forms when the last\n"
    "                          one is done; serial: one request at a time\n"
    "  --join-ratio R          continuous: waiting sentences join a running batch once\n"
    "                          R x its sentences can join at once, or after\n"
    "                          --join-wait-steps steps (0: at every step; default 0 on\n"
    "                          the CPU, 0.5 on cuda)\n"
    "  --join-wait-steps N     (default 20)\n"
    "  --max-queue-tokens N    source tokens waiting per model before 429 (default 20000)\n"
    "  --max-sentence-tokens N tokens of one sentence, eos included (default 256)\n"
    "  --max-sentences N       sentences of one request (default 256)\n"
    "  --max-beam N            the largest beam a request may ask (default: max(8, --beam))\n"
    "  --max-body-bytes N      request body limit, 413 beyond (default 1048576)\n"
    "  --timeout S             a translation's deadline in seconds, 504 after (default 30)\n"
    "  --drain-timeout S       on SIGTERM, how long accepted requests may take (default 30)\n"
    "  --api-key-file F        a bearer token (the file's first line) every endpoint but\n"
    "                          /health and /admin/reload asks for\n"
    "  --allowed-hosts LIST    names a request's Host header may give, comma-separated, or\n"
    "                          '*' for any (default: on a loopback address its loopback\n"
    "                          names, which keeps out pages rebinding a domain to it; else\n"
    "                          any)\n"
    "  --admin-key-file F      the token of POST /admin/reload alone (its own file, another\n"
    "                          token); without it the endpoint is closed and SIGHUP reloads\n"
    "  --http-threads N        requests handled at once (default 256); connections\n"
    "                          cost no thread\n"
    "  --max-connections N     open connections; a further one gets 503 (default 4096)\n"
    "  --read-timeout S        a request's headers and body must arrive within S of its\n"
    "                          first byte, else 408 and the connection closed (default 5)\n"
    "  --idle-timeout S        a connection with no request begun is closed after S\n"
    "                          (default 5)\n"
    "  --help                  this text\n"
    "The runtime's switches, as tern-translate's (--max-batch-tokens and\n"
    "--max-batch-sentences bound the running batch; --max-batch-sentences 0: 128):\n";

struct Args {
  std::vector<std::pair<std::string, std::string>> models;  // name, path
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string batching = "continuous";
  double join_ratio = -1;  // -1: the device's default
  int join_wait_steps = 20;
  int64_t max_queue_tokens = 20000;
  int max_sentence_tokens = 256;
  int max_sentences = 256;
  int max_beam = 0;
  size_t max_body_bytes = 1 << 20;
  double timeout = 30, drain_timeout = 30, read_timeout = 5, idle_timeout = 5;
  std::string api_key_file;
  std::string admin_key_file;
  std::string allowed_hosts;  // --allowed-hosts as given; "" : the listen address's default
  int http_threads = 256;
  int max_connections = 4096;
  TranslateFlags runtime;
  bool help = false;
};

void ParseModel(const std::string& value, Args* args) {
  std::string name, path = value;
  if (const size_t eq = value.find('='); eq != std::string::npos) {
    name = value.substr(0, eq);
    path = value.substr(eq + 1);
  } else {
    name = std::filesystem::path(path).stem().string();
  }
  if (name.empty() || path.empty()) Fail("--model '", value, "' is not NAME=PATH");
  for (const auto& m : args->models) {
    if (m.first == name) Fail("--model: the name '", name, "' is given twice");
  }
  args->models.push_back({name, path});
}

void ParseListen(const std::string& value, Args* args) {
  const size_t colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    Fail("--listen '", value, "' is not HOST:PORT (e.g. 127.0.0.1:8080)");
  }
  args->host = value.substr(0, colon);
  if (args->host.size() > 2 && args->host.front() == '[') {
    args->host = args->host.substr(1, args->host.size() - 2);  // [::1]:8080
  }
  args->port = ParseIntFlag("--listen's port", value.substr(colon + 1));
  if (args->port > 65535) Fail("--listen: port ", args->port, " is above 65535");
}

double ParseSeconds(const std::string& flag, const std::string& value) {
  const float s = ParseFloatFlag(flag, value, 0, 86400);
  if (!(s > 0)) Fail(flag, " needs a positive number of seconds, got '", value, "'");
  return s;
}

// The server's own options; false when `flag` is none of them.
bool ParseServerFlag(const std::string& flag, const FlagValue& next, Args* args) {
  if (flag == "--model") {
    ParseModel(next(), args);
  } else if (flag == "--listen") {
    ParseListen(next(), args);
  } else if (flag == "--batching") {
    args->batching = next();
    inference::serve::ParseBatching(args->batching);  // checks the name
  } else if (flag == "--join-ratio") {
    args->join_ratio = ParseFloatFlag(flag, next(), 0.f, 64.f);
  } else if (flag == "--join-wait-steps") {
    args->join_wait_steps = ParseIntFlag(flag, next());
  } else if (flag == "--max-queue-tokens") {
    args->max_queue_tokens = ParseIntFlag(flag, next());
  } else if (flag == "--max-sentence-tokens") {
    args->max_sentence_tokens = ParseIntFlag(flag, next());
  } else if (flag == "--max-sentences") {
    args->max_sentences = ParseIntFlag(flag, next());
  } else if (flag == "--max-beam") {
    args->max_beam = ParseIntFlag(flag, next());
  } else if (flag == "--max-body-bytes") {
    args->max_body_bytes = ParseIntFlag(flag, next());
  } else if (flag == "--timeout") {
    args->timeout = ParseSeconds(flag, next());
  } else if (flag == "--drain-timeout") {
    args->drain_timeout = ParseSeconds(flag, next());
  } else if (flag == "--read-timeout") {
    args->read_timeout = ParseSeconds(flag, next());
  } else if (flag == "--idle-timeout") {
    args->idle_timeout = ParseSeconds(flag, next());
  } else if (flag == "--max-connections") {
    args->max_connections = ParseIntFlag(flag, next());
  } else if (flag == "--api-key-file") {
    args->api_key_file = next();
  } else if (flag == "--allowed-hosts") {
    args->allowed_hosts = next();
  } else if (flag == "--admin-key-file") {
    args->admin_key_file = next();
  } else if (flag == "--http-threads") {
    args->http_threads = ParseIntFlag(flag, next());
  } else if (flag == "--help" || flag == "-h") {
    args->help = true;
  } else {
    return false;
  }
  return true;
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  ForEachFlag(argc, argv, [&](const std::string& flag, const FlagValue& next) {
    return ParseServerFlag(flag, next, &args) || ParseTranslateFlag(flag, next, &args.runtime);
  });
  if (args.help) return args;
  if (args.models.empty()) Fail("--model NAME=PATH is required (see --help)");
  if (args.max_beam == 0) args.max_beam = std::max(8, args.runtime.beam);
  if (args.max_beam < 1 || args.max_beam > inference::kMaxBeamSize) {
    Fail("--max-beam ", args.max_beam, " is outside 1 to ", inference::kMaxBeamSize,
         ", the runtime's largest beam");
  }
  if (args.runtime.beam > args.max_beam) Fail("--beam is above --max-beam ", args.max_beam);
  if (args.max_sentence_tokens < 2) Fail("--max-sentence-tokens must be at least 2");
  if (args.runtime.max_input_length > 0 || args.runtime.crop) {
    Fail("--max-input-length and --crop are tern-translate's; tern-serve refuses a longer ",
         "sentence with 400 at --max-sentence-tokens");
  }
  if (args.max_sentences < 1) Fail("--max-sentences must be at least 1");
  if (args.http_threads < 1 || args.http_threads > 4096) {
    Fail("--http-threads must be 1 to 4096, got ", args.http_threads);
  }
  if (args.max_connections < 1) Fail("--max-connections must be at least 1");
  if (args.max_queue_tokens < args.max_sentence_tokens) {
    Fail("--max-queue-tokens ", args.max_queue_tokens, " cannot hold one sentence of ",
         "--max-sentence-tokens ", args.max_sentence_tokens);
  }
  return args;
}

// The Host names a request may give (ApiOptions::allowed_hosts): --allowed-hosts, else a loopback
// address's own names, else any.
std::vector<std::string> AllowedHosts(const Args& args) {
  std::vector<std::string> names;
  if (args.allowed_hosts == "*") return names;
  if (args.allowed_hosts.empty()) {
    const bool loopback =
        args.host == "localhost" || args.host == "::1" || args.host.rfind("127.", 0) == 0;
    if (loopback) names = {"localhost", "127.0.0.1", "::1"};
    if (loopback && args.host != "localhost" && args.host != "127.0.0.1" && args.host != "::1")
      names.push_back(args.host);
    return names;
  }
  std::string name;
  for (size_t i = 0; i <= args.allowed_hosts.size(); ++i) {
    const char c = i < args.allowed_hosts.size() ? args.allowed_hosts[i] : ',';
    if (c != ',') {
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      continue;
    }
    // One colon is a port (a name:port never matches); IPv6 names have more.
    if (name.empty() || name.find_first_of(" /*[]") != std::string::npos ||
        std::count(name.begin(), name.end(), ':') == 1) {
      Fail("--allowed-hosts '", args.allowed_hosts, "': '", name,
           "' is not a host name (give names without ports, comma-separated, or '*')");
    }
    names.push_back(name);
    name.clear();
  }
  return names;
}

// The token in the first line of `path`, read for `flag`.
std::string ReadKey(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) Fail(flag, " ", path, ": cannot read it");
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) Fail(flag, " ", path, ": its first line is empty; put the token there");
  return key;
}

// A memfd holding a copy of `path`'s bytes; tern::Error naming the file when it cannot be read.
int PrivateCopy(const std::string& path) {
  const int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) Fail(path, ": cannot open the model file (", std::strerror(errno), ")");
  const int out = memfd_create("tern-serve-model", MFD_CLOEXEC);
  if (out < 0) {
    close(in);
    Fail("cannot make a memory file for ", path, " (", std::strerror(errno), ")");
  }
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(in, buffer, sizeof(buffer));
    if (n == 0) break;
    if (n < 0 || write(out, buffer, n) != n) {
      close(in);
      close(out);
      Fail(path, ": cannot read the model file (", std::strerror(errno), ")");
    }
  }
  close(in);
  return out;
}

// The models and their loading: at start, and again on a reload (one at a time).
class Models {
 public:
  Models(const Args& args, inference::TranslatorOptions options)
      : args_(args), options_(std::move(options)) {}

  std::shared_ptr<LoadedModel> Load(const std::string& path, int generation) {
    Timer timer;
    auto model = std::make_shared<LoadedModel>();
    // The model maps a private copy of the file (a memfd): a file rewritten in place while it
    // serves (cp over it truncates it) would pull the mapped pages from under the running model.
    // Closed however the load ends (the mapping keeps the memory of a model that loaded).
    struct Closer {
      int fd;
      ~Closer() { close(fd); }
    } copy{PrivateCopy(path)};
    const std::string copy_path = "/proc/self/fd/" + std::to_string(copy.fd);
    try {
      model->translator = inference::Translator::FromModelFile(copy_path, options_);
    } catch (const Error& e) {
      std::string message = e.what();
      for (size_t at; (at = message.find(copy_path)) != std::string::npos;) {
        message.replace(at, copy_path.size(), path);
      }
      throw Error(message);
    }
    model->path = path;
    model->load_seconds = timer.Seconds();
    model->generation = generation;
    return model;
  }

  void Start(inference::serve::ServeMetrics* metrics) {
    inference::serve::SchedulerOptions options;
    options.batching = inference::serve::ParseBatching(args_.batching);
    options.max_batch_tokens = args_.runtime.max_batch_tokens;
    options.max_batch_sentences =
        args_.runtime.max_batch_sentences > 0 ? args_.runtime.max_batch_sentences : 128;
    options.max_queue_tokens = args_.max_queue_tokens;
    options.max_sentence_tokens = args_.max_sentence_tokens;
    options.max_beam = args_.max_beam;
    options.workers = args_.runtime.workers;
    // On a GPU a join costs a step's worth of launches whatever it carries: fewer, larger joins
    // (docs/serving.md#gpu).
    const double device_join_ratio = args_.runtime.device == Device::kCuda ? 0.5 : 0;
    options.join_ratio = args_.join_ratio >= 0 ? args_.join_ratio : device_join_ratio;
    options.join_wait_steps = args_.join_wait_steps;
    for (const auto& [name, path] : args_.models) {
      auto model = Load(path, 1);
      std::fprintf(stderr, "tern-serve: model %s loaded from %s in %.2f s\n", name.c_str(),
                   path.c_str(), model->load_seconds);
      metrics->SetGauge("tern_model_load_seconds", inference::serve::Labels({{"model", name}}),
                        model->load_seconds);
      schedulers_[name] = std::make_unique<Scheduler>(name, model, options, metrics);
      paths_[name] = path;
    }
    metrics_ = metrics;
  }

  // The model's file loaded again and serving new requests, or why not. One reload at a time:
  // each holds a second copy of the model until the old one's requests finish, so one asked
  // while another runs is refused (kBusy), not queued.
  serve::ReloadOutcome Reload(const std::string& name) {
    std::unique_lock<std::mutex> lock(reload_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      return {serve::ReloadOutcome::kBusy, "a reload is running; try again when it is done"};
    }
    Scheduler& scheduler = *schedulers_.at(name);
    const auto labels = [&](const char* result) {
      return inference::serve::Labels({{"model", name}, {"result", result}});
    };
    try {
      auto model = Load(paths_.at(name), scheduler.current()->generation + 1);
      scheduler.Swap(model);
      metrics_->SetGauge("tern_model_load_seconds", inference::serve::Labels({{"model", name}}),
                         model->load_seconds);
      metrics_->AddCounter("tern_model_reloads_total", labels("ok"));
      std::fprintf(stderr, "tern-serve: model %s reloaded from %s in %.2f s (generation %d)\n",
                   name.c_str(), paths_.at(name).c_str(), model->load_seconds, model->generation);
      return {};
    } catch (const std::exception& e) {
      metrics_->AddCounter("tern_model_reloads_total", labels("failed"));
      std::fprintf(stderr, "tern-serve: model %s: reload failed, the old model keeps serving: %s\n",
                   name.c_str(), e.what());
      return {serve::ReloadOutcome::kFailed,
              std::string("the new file failed to load: ") + e.what()};
    }
  }

  std::map<std::string, Scheduler*> schedulers() const {
    std::map<std::string, Scheduler*> out;
    for (const auto& [name, s] : schedulers_) out[name] = s.get();
    return out;
  }

 private:
  const Args& args_;
  const inference::TranslatorOptions options_;
  std::map<std::string, std::unique_ptr<Scheduler>> schedulers_;
  std::map<std::string, std::string> paths_;
  inference::serve::ServeMetrics* metrics_ = nullptr;
  std::mutex reload_mutex_;
};

// Every connection holds a descriptor: --max-connections of them pass a soft limit of 1024. The
// soft limit goes up to the hard one, as servers do.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Run(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  if (args.help) {
    std::fputs(kUsage, stdout);
    std::fputs(kTranslateFlagsUsage, stdout);
    return 0;
  }
  inference::TranslatorOptions options = MakeTranslatorOptions(args.runtime);
  options.search.need_scores = true;  // scores on request, at any beam
  if (args.runtime.threads > 0) SetComputeThreads(args.runtime.threads);
  serve::ApiOptions api_options;
  if (!args.api_key_file.empty())
    api_options.api_key = ReadKey("--api-key-file", args.api_key_file);
  api_options.allowed_hosts = AllowedHosts(args);
  if (!args.admin_key_file.empty()) {
    api_options.admin_key = ReadKey("--admin-key-file", args.admin_key_file);
    if (api_options.admin_key == api_options.api_key) {
      Fail(
          "--admin-key-file holds the --api-key-file token: every client could reload the "
          "models; give the admin a token of its own");
    }
  }
  api_options.timeout_seconds = args.timeout;
  api_options.limits = {.max_sentences = args.max_sentences,
                        .max_beam = args.max_beam,
                        .default_beam = args.runtime.beam};

  // Signals may land on any thread (the BLAS's start before main): the handler only writes the
  // signal's number into a pipe, which the main thread reads.
  if (pipe(signal_pipe) != 0) Fail("cannot make a pipe for the signals");
  struct sigaction action {};
  action.sa_handler = [](int sig) {
    const char c = static_cast<char>(sig);
    [[maybe_unused]] ssize_t n = write(signal_pipe[1], &c, 1);
  };
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client gone while its answer is written

  inference::serve::ServeMetrics metrics;
  serve::HttpApi api(api_options, &metrics);
  serve::HttpServerOptions http_options;
  http_options.handler_threads = args.http_threads;
  http_options.max_connections = args.max_connections;
  http_options.read_timeout = args.read_timeout;
  http_options.idle_timeout = args.idle_timeout;
  http_options.max_body_bytes = args.max_body_bytes;
  RaiseDescriptorLimit();
  serve::HttpServer server(http_options, &api);
  const int port = server.Listen(args.host, args.port);
  server.Start();
  std::printf("tern-serve: listening on http://%s:%d\n", args.host.c_str(), port);
  std::fflush(stdout);

  Models models(args, options);
  models.Start(&metrics);  // on failure the server's destructor stops it
  api.SetModels(models.schedulers(),
                [&models](const std::string& name) { return models.Reload(name); });
  std::fprintf(stderr, "tern-serve: ready\n");

  int signal_number = 0;
  for (char c = 0; read(signal_pipe[0], &c, 1) == 1 || errno == EINTR;) {
    signal_number = c;
    if (signal_number != SIGHUP) break;
    for (const auto& [name, s] : models.schedulers()) {
      const serve::ReloadOutcome outcome = models.Reload(name);
      if (outcome.result == serve::ReloadOutcome::kBusy) {
        std::fprintf(stderr, "tern-serve: SIGHUP: model %s: %s\n", name.c_str(),
                     outcome.message.c_str());
      }
    }
  }
  std::fprintf(stderr, "tern-serve: %s: draining (at most %.0f s)\n", strsignal(signal_number),
               args.drain_timeout);
  api.BeginDrain();
  for (const auto& [name, s] : models.schedulers()) s->Drain();
  server.StopAccepting();  // no new connections; answers close theirs
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(args.drain_timeout));
  bool drained = true;
  for (const auto& [name, s] : models.schedulers()) drained &= s->WaitIdle(until);
  for (const auto& [name, s] : models.schedulers()) s->Stop();  // wakes what is left: 503
  server.Stop();
  std::fprintf(stderr, "tern-serve: %lld translation requests accepted, %lld answered 200\n",
               static_cast<long long>(api.accepted()), static_cast<long long>(api.answered()));
  if (!drained) {
    Fail("the drain timeout (", args.drain_timeout,
         " s, --drain-timeout) passed with requests still running; they were answered 503");
  }
  std::fprintf(stderr, "tern-serve: every accepted request answered; stopped\n");
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  tern::InitLogging(argv[0]);
  return tern::RunMain("tern-serve", [&] { return tern::Run(argc, argv); });
}
