// Shared checks of the Communicator interface.
#include "comm/communicator.h"

#include <cstring>

namespace tern::comm {

void Communicator::CheckPeerAndTag(int peer, int tag, bool allow_any_source) const {
  CHECK((allow_any_source && peer == kAnySource) || (peer >= 0 && peer < size()))
      << "peer " << peer << " outside [0, " << size() << ")";
  CHECK(tag >= 0 && tag < kMaxUserTag) << "tag " << tag << " outside [0, kMaxUserTag)";
}

void Communicator::RecvInto(int peer, int tag, void* data, size_t bytes) {
  CheckPeerAndTag(peer, tag, false);
  std::string message;
  Recv(peer, tag, &message);
  CHECK_EQ(message.size(), bytes) << "message from rank " << peer << " with tag " << tag;
  if (bytes > 0) std::memcpy(data, message.data(), bytes);
}

std::vector<int64_t> Offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) {
    CHECK_GE(counts[i], 0);
    offsets[i + 1] = offsets[i] + counts[i];
  }
  return offsets;
}

}  // namespace tern::comm
