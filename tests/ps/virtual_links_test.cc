// The simulated hosts' links: a message takes its bytes over the rate plus the delay, a link
// carries one message at a time each way, and a receiver's link is never held idle for a
// message still waiting behind its sender's busy link.
#include "ps/virtual_links.h"

#include <gtest/gtest.h>

namespace tern::ps {
namespace {

TEST(VirtualLinksTest, AMessageOnIdleLinksTakesItsBytesOverTheRateAndTheDelay) {
  VirtualLinks links(2, 1000, 0.01);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 1, 500, 2.0), 2.0 + 0.5 + 0.01);
}

TEST(VirtualLinksTest, UnlimitedLinksTakeOnlyTheDelay) {
  VirtualLinks links(3, 0, 0.02);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 1, 1 << 20, 1.0), 1.02);
  EXPECT_DOUBLE_EQ(links.Transfer(2, 1, 1 << 20, 1.0), 1.02);
}

TEST(VirtualLinksTest, ASendersMessagesLeaveOneAfterAnother) {
  VirtualLinks links(3, 1000, 0);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 1, 1000, 0), 1.0);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 2, 1000, 0), 2.0);  // behind the first on host 0's uplink
}

TEST(VirtualLinksTest, AReceiverTakesOneMessageAtATime) {
  VirtualLinks links(3, 1000, 0);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 2, 1000, 0), 1.0);
  EXPECT_DOUBLE_EQ(links.Transfer(1, 2, 1000, 0), 2.0);  // host 2's downlink is busy until 1
}

TEST(VirtualLinksTest, AMessageFromAnIdleSenderPassesOneWaitingBehindItsSendersLink) {
  // Host 0's uplink is busy until 3 s with a message to host 2; its next message, to host 1,
  // cannot start before 3 s. Host 2 sends to host 1 at 0.5 s: host 1's downlink is idle until
  // host 0's message comes, so host 2's goes through at once instead of after it.
  VirtualLinks links(3, 1000, 0);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 2, 3000, 0), 3.0);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 1, 1000, 0), 4.0);
  EXPECT_DOUBLE_EQ(links.Transfer(2, 1, 1000, 0.5), 1.5);
  // One that does not fit before the waiting message goes after it.
  EXPECT_DOUBLE_EQ(links.Transfer(2, 1, 2000, 1.5), 6.0);
}

TEST(VirtualLinksTest, ALateSendStampedEarlierStartsNoEarlierThanWhatWasLetGo) {
  VirtualLinks links(3, 1000, 0);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 1, 1000, 0), 1.0);
  EXPECT_DOUBLE_EQ(links.Transfer(0, 1, 1000, 5.0), 6.0);  // lets the stretch [0, 1) go
  // The end of a run flushes a send stamped before the last: it cannot use the time let go,
  // but it may use the free stretch after it.
  EXPECT_DOUBLE_EQ(links.Transfer(2, 1, 500, 0.2), 1.5);
}

}  // namespace
}  // namespace tern::ps
