// The network of simulated hosts (ps/virtual_cluster.h): each host has one link to a switch,
// carrying one message at a time in each direction at a fixed rate, and a message crosses a
// fixed delay between the sender's link and the receiver's.
//
// A message leaves its sender's uplink in the order it was sent. It streams through the
// receiver's downlink from the first moment after its first bytes reach that link (leave +
// delay) at which the downlink is free for the message's whole wire time: the switch holds it
// meanwhile. A message placed later may take an earlier free stretch than one placed before it
// (a message from an idle sender passes one still waiting behind its sender's busy uplink), as
// on a real switch; what was placed is never moved. A receiver's link reserved strictly in the
// order messages were sent would stay idle while a later message could use it, and time over
// a slow link would then depend on how the senders' sends happen to interleave.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace tern::ps {

class VirtualLinks {
 public:
  // bytes_per_second 0: unlimited (a message takes only the delay).
  VirtualLinks(int hosts, double bytes_per_second, double delay_seconds);

  // When a message of `bytes` from host `from` to host `to`, sent at `time`, has arrived.
  // Calls come in non-decreasing `time`, but for a last few at the end of a run, which are
  // never placed before what was already let go.
  double Transfer(int from, int to, int64_t bytes, double time);

 private:
  const double bytes_per_second_;
  const double delay_seconds_;
  std::vector<double> uplink_free_;  // per host: when its uplink is next idle
  // Per host: the downlink's reserved stretches [begin, end), in order and disjoint; those that
  // ended before a message was sent are let go, up to released_.
  std::vector<std::deque<std::pair<double, double>>> downlink_busy_;
  std::vector<double> released_;
};

}  // namespace tern::ps
