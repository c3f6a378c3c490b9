// For tern-serve's program tests: tiny model files with a real SentencePiece vocabulary (int16,
// with a lexical shortlist), the server as a child process on 127.0.0.1 with the port it reports,
// tern-translate's answers to compare with, and raw-socket clients for what HTTP libraries do
// not do (leave mid-request, send slowly, stall).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "raw_socket.h"

namespace tern::serve::testing {

// The files of the tests: a vocabulary trained on a toy corpus, and models written with it.
struct ModelFiles {
  std::string dir;
  std::string model;                   // int16, shortlist; ends sentences (eos_bias 2.5)
  std::string other;                   // the same with other weights (seed 11): a reload's new file
  std::string endless;                 // eos never wins: every sentence runs to its length limit
  std::vector<std::string> sentences;  // source sentences in the toy language
};
// Writes the files into a fresh temporary folder (removed by RemoveModelFiles).
ModelFiles MakeModelFiles();
void RemoveModelFiles(const ModelFiles& files);

// tern-translate's translation of each line alone (--max-batch-sentences 1), with `flags`.
std::vector<std::string> TranslateAlone(const std::string& model,
                                        const std::vector<std::string>& lines,
                                        const std::string& flags);

class ServerProcess {
 public:
  // What the start must reach, or the test fails (ADD_FAILURE): /ready answering 200, the
  // "listening on" line, or nothing (a start meant to fail).
  enum Expect { kReady, kListening, kAnything };
  // Starts TERN_SERVE_BIN with `args` (--listen 127.0.0.1:0 added) and waits, 60 s at most, for
  // its "listening on" line and then (kReady) for /ready.
  // `env`: NAME=VALUE settings for the child alone.
  explicit ServerProcess(const std::vector<std::string>& args, Expect expect = kReady,
                         const std::vector<std::string>& env = {});
  ~ServerProcess();  // SIGKILL when still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  bool started() const { return port_ > 0; }
  void Signal(int sig) const;
  // Waits for the exit (at most `timeout`); its exit code, or -1 (killed by a signal or timeout).
  int Wait(std::chrono::seconds timeout = std::chrono::seconds(120));
  std::string Stderr() const;
  long RssKb() const;  // the server's resident memory

 private:
  pid_t pid_ = -1;
  int port_ = -1;
  std::string stderr_path_;
  bool exited_ = false;
};

// One HTTP/1.1 exchange over a fresh connection, written by hand: `request` is sent in pieces
// of `chunk` bytes `gap` apart; returns the status (0 when the server closed without one) and
// the body.
struct RawResponse {
  int status = 0;
  std::string body;
};
RawResponse RawExchange(int port, const std::string& request, size_t chunk = 1 << 20,
                        std::chrono::milliseconds gap = std::chrono::milliseconds(0),
                        std::chrono::seconds timeout = std::chrono::seconds(30));
// Connects, sends `request` and closes without reading: a client that leaves.
void SendAndLeave(int port, const std::string& request);
// A POST of `body` to `path` as HTTP/1.1 text.
std::string PostText(const std::string& path, const std::string& body,
                     const std::string& extra_headers = "");

// The value of one series in a Prometheus text page (0 when absent).
double MetricValue(const std::string& page, const std::string& series);

// A JSON body {"text": [lines...]} with extra fields appended verbatim.
std::string TranslateBody(const std::vector<std::string>& lines, const std::string& extra = "");

}  // namespace tern::serve::testing
