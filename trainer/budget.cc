#include "trainer/budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/error.h"

namespace tern::trainer {
namespace {

// Digits with an optional fraction and exponent ("30", "1.5", "2e3"): no sign, no hex, no
// "nan" or "inf", which strtod would take.
bool IsPlainNumber(const std::string& s) {
  size_t i = 0, digits = 0;
  auto run = [&] {
    size_t n = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++n;
    return n;
  };
  digits += run();
  if (i < s.size() && s[i] == '.') {
    ++i;
    digits += run();
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (run() == 0) return false;
  }
  return i == s.size();
}

// The smaller of two limits, 0 meaning none.
template <typename T>
T Sooner(T a, T b) {
  return a == 0 ? b : std::min(a, b);
}

}  // namespace

Budget Budget::Parse(const std::string& text) {
  Budget b;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    while (!part.empty() && std::isspace(static_cast<unsigned char>(part.back()))) part.pop_back();
    part.erase(0, part.find_first_not_of(" \t"));
    if (part.empty()) continue;
    const char unit = part.back();
    const std::string number = part.substr(0, part.size() - 1);
    const double value = IsPlainNumber(number) ? std::strtod(number.c_str(), nullptr) : 0;
    if (!std::isfinite(value) || value <= 0) {
      Fail("budget '", text, "': '", part, "' is not a positive number with a unit ",
           "(s, m, h for time, u for updates, e for epochs), e.g. 30m or 2000u");
    }
    if (unit == 'u' || unit == 'e') {
      // Counted things: a fraction of an update or an epoch would round to no limit at all.
      if (value != std::floor(value) || value > 1e15) {
        Fail("budget '", text, "': '", part, "': ", unit == 'u' ? "updates" : "epochs",
             " are counted in whole numbers from 1 to 10^15");
      }
      int64_t& limit = unit == 'u' ? b.updates : b.epochs;
      limit = Sooner(limit, static_cast<int64_t>(value));
      continue;
    }
    const double scale = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600 : 0;
    if (scale == 0) {
      Fail("budget '", text, "': unknown unit '", std::string(1, unit),
           "' (s, m, h, u or e; e.g. 30m, 2000u, 5e)");
    }
    if (!std::isfinite(value * scale)) Fail("budget '", text, "': '", part, "' is too long");
    b.seconds = Sooner(b.seconds, value * scale);
  }
  return b;
}

bool Budget::Reached(double elapsed_seconds, int64_t update, int64_t epoch) const {
  return (seconds > 0 && elapsed_seconds >= seconds) || (updates > 0 && update >= updates) ||
         (epochs > 0 && epoch >= epochs);
}

}  // namespace tern::trainer
