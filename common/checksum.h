// Checksums for files Tern writes (model files, checkpoints): CRC-32 (zlib's polynomial).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tern {

uint32_t Crc32(const void* data, size_t size, uint32_t seed = 0);
inline uint32_t Crc32(std::string_view s) { return Crc32(s.data(), s.size()); }

// 64-bit FNV-1a, for config hashes and cheap fingerprints.
uint64_t Fingerprint64(std::string_view s);

}  // namespace tern
