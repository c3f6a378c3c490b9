// Staleness histogram (see staleness.h).
#include "ps/staleness.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tern::ps {

void StalenessHistogram::Record(uint64_t behind) {
  ++counts_[std::min<uint64_t>(behind, kBuckets - 1)];
  sum_ += static_cast<double>(behind);
  max_ = std::max(max_, behind);
}

void StalenessHistogram::Merge(const StalenessHistogram& o) {
  for (int b = 0; b < kBuckets; ++b) counts_[b] += o.counts_[b];
  sum_ += o.sum_;
  max_ = std::max(max_, o.max_);
}

int64_t StalenessHistogram::total() const {
  int64_t t = 0;
  for (int64_t c : counts_) t += c;
  return t;
}

int StalenessHistogram::Percentile(double q) const {
  const int64_t n = total();
  if (n == 0) return 0;
  // The rank of the q-quantile among n pushes, 1-based: ceil(q n), at least 1.
  const int64_t want = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(q * n)));
  int64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= want) return b;
  }
  return kBuckets - 1;
}

double StalenessHistogram::mean() const { return total() == 0 ? 0.0 : sum_ / total(); }

std::string StalenessHistogram::ToString() const {
  std::ostringstream out;
  out << "n=" << total() << " mean=" << mean() << " max=" << max_ << " [";
  bool first = true;
  for (int b = 0; b < kBuckets; ++b) {
    if (counts_[b] == 0) continue;
    out << (first ? "" : " ") << b << (b == kBuckets - 1 ? "+" : "") << ":" << counts_[b];
    first = false;
  }
  out << "]";
  return out.str();
}

}  // namespace tern::ps
