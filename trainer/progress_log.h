// Training's progress as Marian prints it, from structured records: a progress line every
// training.disp_freq updates, the validation lines, the end-of-run line. The records hold what
// a reader of the run needs, so other sinks (a metrics file) can take the same ones.
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
};

// "Ep. 1 : Up. 500 : Sen. 21,344 : Cost 5.12345678 : Time 240.12s : 2390.11 words/s : L.r. ..."
std::string ProgressLine(const ProgressRecord& r);
// "... valid ce-mean-words ...", then the BLEU line and the staleness line when present.
std::vector<std::string> ValidationLines(const ValidationRecord& r);

}  // namespace tern::trainer
