// Training budgets in Marian's --after syntax: "30m", "2h", "90s" (wall time), "2000u"
// (updates), "5e" (epochs); several joined by commas stop at whichever comes first. Numbers are
// plain decimals ("1.5h", "2e3u"), positive and finite; updates and epochs whole.
#pragma once

#include <cstdint>
#include <string>

namespace tern::trainer {

struct Budget {
  double seconds = 0;   // 0 = unlimited
  int64_t updates = 0;  // 0 = unlimited
  int64_t epochs = 0;   // 0 = unlimited

  // Throws tern::Error naming the text for a malformed budget.
  static Budget Parse(const std::string& text);
  bool Reached(double elapsed_seconds, int64_t update, int64_t epoch) const;
  bool unlimited() const { return seconds == 0 && updates == 0 && epochs == 0; }
};

}  // namespace tern::trainer
