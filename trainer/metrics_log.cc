#include "trainer/metrics_log.h"

#include <cstdlib>

#include "common/file_io.h"

namespace tern::trainer {

StalenessSummary SummarizeStaleness(const ps::StalenessHistogram& h) {
  return {h.total(),         h.mean(),           h.Percentile(0.5),
          h.Percentile(0.9), h.Percentile(0.99), static_cast<int64_t>(h.max())};
}

void MetricsLog::Append(const std::string& line) const { AppendToFile(path_, line + "\n"); }

void MetricsLog::Clear() const {
  if (FileExists(path_)) WriteFileAtomic(path_, "");
}

void MetricsLog::KeepUpTo(double seconds) const {
  if (!FileExists(path_)) return;
  const std::string text = ReadFile(path_);
  std::string kept;
  size_t begin = 0;
  for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string_view line(text.data() + begin, end - begin);
    const size_t at = line.find("\"wall_s\":");
    if (at == std::string_view::npos) continue;  // not a record of ours
    const double wall = std::strtod(std::string(line.substr(at + 9)).c_str(), nullptr);
    if (wall <= seconds) kept.append(line).push_back('\n');
  }
  if (kept.size() != text.size()) WriteFileAtomic(path_, kept);
}

}  // namespace tern::trainer
