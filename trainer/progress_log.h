// Training's progress as Marian prints it, from structured records: a progress line every
// training.disp_freq updates, the validation lines, the end-of-run line. The same records, one
// per rank and log point and one per validation, are the lines of MODEL_DIR/metrics.jsonl
// (MetricsLine, with a "start" record per process; trainer/metrics_log.h writes them), which sweeps
// read instead of the log text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tern::trainer {

// 1234567 -> "1,234,567".
std::string WithCommas(int64_t n);

struct ProgressRecord {
  int64_t epoch = 0;                    // 1-based
  int64_t update = 0;                   // rank 0's
  int64_t sentences = 0;                // all ranks'
  double cost_per_word = 0;             // mean training cost per target word since the last record
  double elapsed_seconds = 0;           // since the run's start, across resumes
  std::vector<float> words_per_second;  // each rank's, since the last record
  float learning_rate = 0;
  std::optional<float> sent_fraction;  // gradient dropping: of the entries in the last push
  std::optional<float> loss_scale;     // fp16
  int64_t skipped_steps = 0;           // fp16: steps whose gradients overflowed
};

// How many versions behind the pushes to one shard were (ps::StalenessHistogram), in short.
struct StalenessSummary {
  int64_t pushes = 0;
  double mean = 0;
  int p50 = 0, p90 = 0, p99 = 0;  // the histogram's last bucket (15) stands for 15 or more
  int64_t max = 0;
};

// One rank's progress at a log point: a "train" line of metrics.jsonl.
struct RankProgress {
  int rank = 0;
  int64_t update = 0;          // this rank's
  int64_t epoch = 0;           // 1-based
  double elapsed_seconds = 0;  // since the run's start, across resumes (virtual workers: simulated)
  int64_t sentences = 0;       // this rank's, since the run's start
  int64_t target_words = 0;    // this rank's, since the run's start
  double cost_per_word = 0;    // mean training cost per target word since its last record
  float learning_rate = 0;
  float words_per_second = 0;                 // since its last record
  std::optional<float> sent_fraction;         // gradient dropping: of the entries in its last push
  std::optional<StalenessSummary> staleness;  // of the pushes to this rank's shard
  int64_t bytes_pushed = 0;  // as a worker, since this process started: pushes to other shards
  int64_t bytes_pulled = 0;  // ... and fresh shards pulled from them
  double cpu_seconds = 0;    // this process's CPU time (all threads), since it started
};

struct ValidationRecord {
  int64_t epoch = 0;  // 1-based
  int64_t update = 0;
  double cross_entropy = 0;  // per target word
  bool new_best = false;
  int64_t stalls = 0;  // validations in a row without improvement
  std::optional<double> bleu, chrf;
  double translation_seconds = 0;
  double elapsed_seconds = 0;            // since the run's start, across resumes
  std::optional<std::string> staleness;  // shard 0's histogram, when versions can be stale
  std::optional<StalenessSummary> staleness_summary;  // the same, for metrics.jsonl
  int64_t sentences = 0;                              // all ranks', as far as rank 0 knows
  int64_t target_words = 0;                           // all ranks', as far as rank 0 knows
};

// "Ep. 1 : Up. 500 : Sen. 21,344 : Cost 5.12345678 : Time 240.12s : 2390.11 words/s : L.r. ..."
std::string ProgressLine(const ProgressRecord& r);
// "... valid ce-mean-words ...", then the BLEU line and the staleness line when present.
std::vector<std::string> ValidationLines(const ValidationRecord& r);

// A process's start, first in metrics.jsonl and again at every resume: the counters of "train"
// records (bytes, CPU time, staleness) count from here.
struct StartRecord {
  int64_t update = 0;          // the update it starts after (0, or the checkpoint's)
  double elapsed_seconds = 0;  // the checkpoint's elapsed time (0 on a fresh start)
  int ranks = 1;
  // What computes the matrix products (ProductsName): runs whose bits differ by kernel say so.
  std::string products;
};

// One JSON object on one line, without the newline: {"kind":"train","rank":0,"update":50,...}
// and {"kind":"valid","rank":0,"update":500,...,"dev_ce":4.81,...}. The keys are listed in
// docs/training.md (training output).
std::string MetricsLine(const RankProgress& r);
std::string MetricsLine(const StartRecord& r);
std::string MetricsLine(const ValidationRecord& r);

}  // namespace tern::trainer
