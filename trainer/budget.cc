#include "trainer/budget.h"

#include <cstdlib>

#include "common/error.h"

namespace tern::trainer {

Budget Budget::Parse(const std::string& text) {
  Budget b;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() : comma + 1;
    if (part.empty()) continue;
    char unit = part.back();
    std::string number = part.substr(0, part.size() - 1);
    char* end = nullptr;
    double value = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || value <= 0)
      Fail("budget '", text, "': '", part, "' is not a positive number with a unit ",
           "(s, m, h for time, u for updates, e for epochs), e.g. 30m or 2000u");
    switch (unit) {
      case 's':
        b.seconds = value;
        break;
      case 'm':
        b.seconds = value * 60;
        break;
      case 'h':
        b.seconds = value * 3600;
        break;
      case 'u':
        b.updates = static_cast<int64_t>(value);
        break;
      case 'e':
        b.epochs = static_cast<int64_t>(value);
        break;
      default:
        Fail("budget '", text, "': unknown unit '", std::string(1, unit),
             "' (s, m, h, u or e; e.g. 30m, 2000u, 5e)");
    }
  }
  return b;
}

bool Budget::Reached(double elapsed_seconds, int64_t update, int64_t epoch) const {
  return (seconds > 0 && elapsed_seconds >= seconds) || (updates > 0 && update >= updates) ||
         (epochs > 0 && epoch >= epochs);
}

}  // namespace tern::trainer
