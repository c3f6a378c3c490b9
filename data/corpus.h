// Reading parallel corpora with validation. Files are streamed (plain or gzip, told apart by
// content, through zlib), never read whole. A pair whose line is invalid UTF-8, empty or blank, or
// too long (in bytes, or in pieces once a vocabulary encodes it) is skipped and counted by reason,
// or, with the "error" policy, stops the run with file:line. Sides of different lengths are always
// an error naming both files and the line where one ran out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/vocab.h"

namespace tern::data {

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF).
bool IsValidUtf8(std::string_view text);
// True when `text` is empty or holds only whitespace (Python's str.isspace(): spaces, tabs, NBSP,
// U+3000, ...; defined beside it in metrics.cc): a line with nothing to learn from or translate.
bool IsBlank(std::string_view text);

// Streams the lines of one file, plain or gzip. A trailing '\r' is dropped. Lines longer than
// max_line_bytes are returned cut to that length with truncated() set, so a file without
// newlines cannot exhaust memory.
class LineReader {
 public:
  // Throws tern::Error naming the path when it cannot be opened.
  LineReader(const std::string& path, int64_t max_line_bytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line (valid until the next call); false at the end of the file.
  bool Next(std::string_view* line);
  bool truncated() const { return truncated_; }
  // 1-based number of the line Next returned last.
  int64_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 private:
  bool Fill();

  std::string path_;
  int64_t max_line_bytes_;
  void* file_ = nullptr;  // gzFile
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::string line_;
  bool truncated_ = false;
  int64_t line_number_ = 0;
};

enum class BadLinePolicy { kSkip, kError };

// Parses "skip" or "error"; `field` names the config field in the error.
BadLinePolicy ParseBadLinePolicy(const std::string& text, const std::string& field);

struct CorpusOptions {
  std::string src_path;
  std::string tgt_path;
  // Longest sentence in pieces (without eos); longer pairs are bad lines. 0 = no limit.
  int max_length = 128;
  // Longest line in bytes; longer pairs are bad lines.
  int64_t max_line_bytes = 1 << 16;
  BadLinePolicy on_bad_line = BadLinePolicy::kSkip;
};

struct CorpusStats {
  int64_t pairs_read = 0;
  int64_t pairs_kept = 0;
  // Pairs skipped, by the first reason found.
  int64_t invalid_utf8 = 0;
  int64_t empty = 0;  // or blank: whitespace only
  int64_t too_long_bytes = 0;
  int64_t too_long_pieces = 0;

  int64_t skipped() const { return invalid_utf8 + empty + too_long_bytes + too_long_pieces; }
  // One line for the log: "read 100 pairs, kept 97; skipped: 1 invalid UTF-8, 2 empty, ...".
  std::string Summary() const;
};

// One raw sentence pair; `line` is its 0-based line index in the files (its sentence id).
struct SentencePair {
  int64_t line = 0;
  std::string_view src, tgt;  // valid until the next call
};

// One encoded pair, without bos/eos.
struct Example {
  int64_t id = 0;  // 0-based line index in the files
  std::vector<int32_t> src, tgt;
};

class CorpusReader {
 public:
  // `vocab` may be null for raw reading (NextRaw); Next needs it. It must outlive the reader.
  CorpusReader(const CorpusOptions& options, const Vocab* vocab);

  // The next pair that passes the checks; false at the end. Throws tern::Error on mismatched
  // line counts and, with kError, on the first bad line.
  bool NextRaw(SentencePair* pair);
  // As NextRaw, encoded; also applies max_length in pieces.
  bool Next(Example* example);
  // Passes `n` raw lines of both files without checking or encoding them (they are not
  // counted in stats()); false when the files end first.
  bool SkipLines(int64_t n);
  // Raw lines of each file read so far (checked, skipped or passed).
  int64_t lines_read() const { return src_.line_number(); }
  const CorpusStats& stats() const { return stats_; }
  const CorpusOptions& options() const { return options_; }

 private:
  // Reads one raw line of each file; false at the end of both. Throws when only one ends.
  bool ReadLines(std::string_view* src, std::string_view* tgt);

  // Counts a bad pair, or throws under kError. `where` is "file:line".
  void Bad(int64_t* counter, const std::string& where, const std::string& what);

  CorpusOptions options_;
  const Vocab* vocab_;
  LineReader src_, tgt_;
  CorpusStats stats_;
};

}  // namespace tern::data
