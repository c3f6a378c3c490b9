// MODEL_DIR/metrics.jsonl: training's progress as data, one JSON object per line
// (trainer/progress_log.h's MetricsLine): a "train" record per rank and log point, a "valid"
// record per validation. Rank 0 alone writes it, the other ranks' records reaching it through
// the coordinator (async) or at the log point (sync), so the file needs no shared writes across
// hosts; each record is one write of a whole line to a file opened O_APPEND.
//
// Resume: the records after the checkpoint a run resumes from describe training that was lost,
// and the resumed run does it again; KeepUpTo drops them, so the file reads as one run.
#pragma once

#include <string>

#include "ps/staleness.h"
#include "trainer/progress_log.h"

namespace tern::trainer {

// A shard's staleness histogram as metrics.jsonl records it.
StalenessSummary SummarizeStaleness(const ps::StalenessHistogram& h);

class MetricsLog {
 public:
  explicit MetricsLog(std::string path) : path_(std::move(path)) {}

  // `line`: one JSON object, without the newline.
  void Append(const std::string& line) const;
  // Keeps the records whose "wall_s" is at most `seconds` (the elapsed time a checkpoint saved)
  // and drops the rest, with any unfinished last line. Rewrites the file atomically.
  void KeepUpTo(double seconds) const;
  // Drops every record (a fresh start in a directory whose earlier run saved no checkpoint).
  void Clear() const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tern::trainer
