#include "common/checksum.h"

#include <zlib.h>

#include <algorithm>

namespace tern {

uint32_t Crc32(const void* data, size_t size, uint32_t seed) {
  uLong crc = seed;
  const Bytef* p = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes uInt lengths
    uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

uint64_t Fingerprint64(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace tern
