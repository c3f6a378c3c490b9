#include "ps/virtual_links.h"

#include <algorithm>

#include "common/error.h"

namespace tern::ps {

VirtualLinks::VirtualLinks(int hosts, double bytes_per_second, double delay_seconds)
    : bytes_per_second_(bytes_per_second),
      delay_seconds_(delay_seconds),
      uplink_free_(static_cast<size_t>(hosts), 0.0),
      downlink_busy_(static_cast<size_t>(hosts)),
      released_(static_cast<size_t>(hosts), 0.0) {
  CHECK_GE(hosts, 1);
  CHECK_GE(bytes_per_second, 0.0);
  CHECK_GE(delay_seconds, 0.0);
}

double VirtualLinks::Transfer(int from, int to, int64_t bytes, double time) {
  const double wire = bytes_per_second_ > 0 ? static_cast<double>(bytes) / bytes_per_second_ : 0.0;
  const double leave = std::max(time, uplink_free_[from]);
  uplink_free_[from] = leave + wire;
  if (wire == 0) return leave + delay_seconds_;
  auto& busy = downlink_busy_[to];
  double& released = released_[to];
  // Stretches over before this message was sent can hold no later message back.
  while (!busy.empty() && busy.front().second <= time) {
    released = std::max(released, busy.front().second);
    busy.pop_front();
  }
  // The first free stretch of `wire` seconds from the moment the first bytes come in.
  double begin = std::max(leave + delay_seconds_, released);
  auto at = busy.begin();
  for (; at != busy.end(); ++at) {
    if (begin + wire <= at->first) break;
    begin = std::max(begin, at->second);
  }
  busy.insert(at, {begin, begin + wire});
  return begin + wire;
}

}  // namespace tern::ps
