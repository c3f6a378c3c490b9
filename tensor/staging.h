// Host values sent to a device without the host waiting for the device: the per-step transfers
// of a GPU run (a training batch, a decoder step's ids and mask).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tensor/allocator.h"
#include "tensor/tensor.h"

namespace tern {

// Values are written into one of `depth` page-locked staging buffers, used in turn, and copied
// with CopyToDeviceAsync, so work queued on the device after the copy needs no wait. A buffer is
// written again only once the device has read it (a DeviceFence per buffer): with depth 2 the
// host fills one batch while the device still reads the last. On the CPU the buffers are plain
// memory and the copy is a memcpy.
//
//   int32_t* host = ring.Next(words);  // fill host[0, words)
//   ring.Send(dst, device, words);
class StagingRing {
 public:
  explicit StagingRing(int depth = 1);
  // Waits for the device to have read every buffer: a copy may still be queued from one, and
  // page-locked memory given back is handed out again at once.
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // The next buffer, with room for `words` 4-byte words, once the device has read what it held.
  int32_t* Next(int64_t words);
  // Queues the copy of the buffer Next gave (its first `words` words) to `dst`, memory of
  // `device`, and moves on to the next buffer.
  void Send(void* dst, Device device, int64_t words);

 private:
  std::vector<Tensor> buffers_;          // page-locked (kInt32), grown as needed
  std::unique_ptr<DeviceFence[]> read_;  // read_[i]: the device has read buffers_[i]
  int next_ = 0;
};

}  // namespace tern
