// Streaming line reading (zlib reads plain files as they are) and the corpus checks.
#include "data/corpus.h"

#include <zlib.h>

#include <cstring>

#include "common/error.h"
#include "common/file_io.h"

namespace tern::data {

bool IsValidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      extra = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      extra = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;  // continuation byte, overlong 2-byte lead (C0/C1) or past U+10FFFF
    }
    if (n - i <= static_cast<size_t>(extra)) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return false;
    if (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) return false;
    i += extra + 1;
  }
  return true;
}

LineReader::LineReader(const std::string& path, int64_t max_line_bytes)
    : path_(path), max_line_bytes_(max_line_bytes), buffer_(1 << 16) {
  CHECK_GT(max_line_bytes, 0);
  RefuseDirectory(path);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) Fail("cannot open ", path, ": ", std::strerror(errno));
  gzbuffer(f, 1 << 17);
  file_ = f;
}

LineReader::~LineReader() {
  if (file_ != nullptr) gzclose(static_cast<gzFile>(file_));
}

bool LineReader::Fill() {
  if (eof_) return false;
  gzFile f = static_cast<gzFile>(file_);
  int got = gzread(f, buffer_.data(), static_cast<unsigned>(buffer_.size()));
  int code = Z_OK;
  const char* message = gzerror(f, &code);
  // A cut gzip stream is reported (as Z_BUF_ERROR) only once the data runs out.
  if (got < 0 || (got == 0 && code != Z_OK)) {
    Fail(path_, ": read error after line ", line_number_, ": ", message,
         " (a truncated or corrupt gzip file?)");
  }
  begin_ = 0;
  end_ = static_cast<size_t>(got);
  if (got == 0) eof_ = true;
  return got > 0;
}

bool LineReader::Next(std::string_view* line) {
  line_.clear();
  truncated_ = false;
  bool any = false;
  for (;;) {
    if (begin_ == end_ && !Fill()) break;
    any = true;
    const char* start = buffer_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    size_t stop = nl ? static_cast<size_t>(static_cast<const char*>(nl) - buffer_.data()) : end_;
    // Keep one byte past the limit: it may be a '\r' to strip, else it marks the line too long.
    const size_t cap = static_cast<size_t>(max_line_bytes_) + 1;
    const size_t room = cap - std::min(line_.size(), cap);
    line_.append(start, std::min(stop - begin_, room));
    if (stop - begin_ > room) truncated_ = true;
    if (nl) {
      begin_ = stop + 1;
      break;
    }
    begin_ = end_;
  }
  if (!any) return false;
  ++line_number_;
  if (!truncated_ && !line_.empty() && line_.back() == '\r') line_.pop_back();
  if (static_cast<int64_t>(line_.size()) > max_line_bytes_) {
    line_.resize(max_line_bytes_);
    truncated_ = true;
  }
  *line = line_;
  return true;
}

BadLinePolicy ParseBadLinePolicy(const std::string& text, const std::string& field) {
  if (text == "skip" || text.empty()) return BadLinePolicy::kSkip;
  if (text == "error") return BadLinePolicy::kError;
  Fail(field, " must be \"skip\" or \"error\", not \"", text, "\"");
}

std::string CorpusStats::Summary() const {
  return StrCat("read ", pairs_read, " sentence pairs, kept ", pairs_kept, "; skipped ", skipped(),
                ": ", invalid_utf8, " invalid UTF-8, ", empty, " empty, ", too_long_bytes,
                " too long in bytes, ", too_long_pieces, " too long in pieces");
}

CorpusReader::CorpusReader(const CorpusOptions& options, const Vocab* vocab)
    : options_(options),
      vocab_(vocab),
      src_(options.src_path, options.max_line_bytes),
      tgt_(options.tgt_path, options.max_line_bytes) {}

void CorpusReader::Bad(int64_t* counter, const std::string& where, const std::string& what) {
  if (options_.on_bad_line == BadLinePolicy::kError) {
    Fail(where, ": ", what, " (set data.on_bad_line=skip to skip such lines)");
  }
  ++*counter;
}

bool CorpusReader::ReadLines(std::string_view* src, std::string_view* tgt) {
  bool has_src = src_.Next(src);
  bool has_tgt = tgt_.Next(tgt);
  if (has_src != has_tgt) {
    const LineReader& longer = has_src ? src_ : tgt_;
    const LineReader& shorter = has_src ? tgt_ : src_;
    Fail("parallel files differ in length: ", shorter.path(), " ends after line ",
         shorter.line_number(), " but ", longer.path(), " goes on (line ", longer.line_number(),
         "); both sides need one line per sentence");
  }
  return has_src;
}

bool CorpusReader::SkipLines(int64_t n) {
  std::string_view src, tgt;
  for (int64_t i = 0; i < n; ++i) {
    if (!ReadLines(&src, &tgt)) return false;
  }
  return true;
}

bool CorpusReader::NextRaw(SentencePair* pair) {
  for (;;) {
    std::string_view src, tgt;
    if (!ReadLines(&src, &tgt)) return false;
    ++stats_.pairs_read;
    const int64_t line = src_.line_number();
    auto where = [&](const LineReader& r) { return StrCat(r.path(), ":", line); };
    const std::string limit = StrCat(options_.max_line_bytes);
    if (src_.truncated() || tgt_.truncated()) {
      Bad(&stats_.too_long_bytes, where(src_.truncated() ? src_ : tgt_),
          "line longer than " + limit + " bytes");
      continue;
    }
    if (!IsValidUtf8(src) || !IsValidUtf8(tgt)) {
      Bad(&stats_.invalid_utf8, where(IsValidUtf8(src) ? tgt_ : src_), "invalid UTF-8");
      continue;
    }
    if (IsBlank(src) || IsBlank(tgt)) {
      const std::string_view blank = IsBlank(src) ? src : tgt;
      Bad(&stats_.empty, where(IsBlank(src) ? src_ : tgt_),
          blank.empty() ? "empty line" : "blank line (whitespace only)");
      continue;
    }
    pair->line = line - 1;
    pair->src = src;
    pair->tgt = tgt;
    ++stats_.pairs_kept;
    return true;
  }
}

bool CorpusReader::Next(Example* example) {
  CHECK(vocab_ != nullptr) << "CorpusReader::Next needs a vocabulary";
  SentencePair pair;
  while (NextRaw(&pair)) {
    example->id = pair.line;
    example->src = vocab_->Encode(pair.src);
    example->tgt = vocab_->Encode(pair.tgt);
    // Control characters and the like, which the vocabulary's normalization removes, leave a line
    // that is blank in pieces.
    if (example->src.empty() || example->tgt.empty()) {
      --stats_.pairs_kept;
      Bad(&stats_.empty,
          StrCat(example->src.empty() ? src_.path() : tgt_.path(), ":", pair.line + 1),
          "blank line (no pieces once normalized)");
      continue;
    }
    const int max = options_.max_length;
    if (max > 0 && (static_cast<int>(example->src.size()) > max ||
                    static_cast<int>(example->tgt.size()) > max)) {
      bool src_long = static_cast<int>(example->src.size()) > max;
      --stats_.pairs_kept;
      Bad(&stats_.too_long_pieces, StrCat(src_long ? src_.path() : tgt_.path(), ":", pair.line + 1),
          StrCat(src_long ? example->src.size() : example->tgt.size(),
                 " pieces, more than max_length ", max));
      continue;
    }
    return true;
  }
  return false;
}

}  // namespace tern::data
