// NumPy .npz archives: a zip file whose members "NAME.npy" each hold one array in NumPy's .npy
// format. This is the file format of Marian's models (names.h maps their contents).
//
// Writing: members stored uncompressed, as Marian's cnpy writes them, with a CRC-32 each, little-
// endian C-order arrays, .npy format 1.0 with the header padded to 64 bytes; no ZIP64, so an
// archive stays below 4 GiB. Reading: stored and deflated members (numpy.savez and
// numpy.savez_compressed), ZIP64 sizes and offsets as numpy.savez writes them; every size and
// offset is checked against the file before use, and a bad file ends in one tern::Error line that
// names the file (and the member). NpzArchive reads the directory and each member's .npy header
// first, inflating nothing more, so a caller checks names, types and shapes before any data is
// inflated (a few megabytes of deflate can claim gigabytes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/file_io.h"

namespace tern::inference {

// One array. `descr` is NumPy's type string: "<f4" (float32), "<f8", "|i1", "|u1", "<i4", ...;
// byte order '<' or '|' (big-endian arrays are refused when read).
struct NpyArray {
  std::string name;            // member name without ".npy"
  std::string descr;           // e.g. "<f4"
  std::vector<int64_t> shape;  // empty for a scalar
  std::string data;            // numel * item size bytes, C order

  int64_t numel() const;
  // The element size from descr ("<f4" -> 4).
  int item_size() const;
  // A float32 array of `shape` holding `values` (numel of shape).
  static NpyArray Float32(std::string name, std::vector<int64_t> shape, const float* values);
};

// "(3, 4)" style, for messages.
std::string ShapeString(const std::vector<int64_t>& shape);

// The bytes of an .npz archive holding `arrays` in order (names must be unique and non-empty).
std::string SerializeNpz(const std::vector<NpyArray>& arrays);
// Writes the archive atomically.
void WriteNpz(const std::string& path, const std::vector<NpyArray>& arrays);

// One member of an archive, as its directory entry and .npy header describe it.
struct NpzMember {
  std::string name;            // without ".npy"
  std::string descr;           // e.g. "<f4"
  std::vector<int64_t> shape;  // empty for a scalar
  // Where its bytes are: method (0 stored, 8 deflate), CRC-32, offset of the (packed) bytes in the
  // file, packed and unpacked sizes, and the .npy header's length (where the data starts).
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t start = 0, packed = 0, unpacked = 0, data_offset = 0;
};

// An archive's members, headers read and checked (each member's data size agrees with its shape
// and type, and deflate could hold it); Read inflates one member's data.
class NpzArchive {
 public:
  // `data` must outlive the archive. tern::Error naming `path` for a bad archive.
  NpzArchive(std::string path, const uint8_t* data, size_t size);
  // Maps the file, which the archive then owns.
  static std::unique_ptr<NpzArchive> Open(const std::string& path);
  NpzArchive(const NpzArchive&) = delete;
  NpzArchive& operator=(const NpzArchive&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<NpzMember>& members() const { return members_; }
  // Member `index` with its data (CRC checked).
  NpyArray Read(size_t index) const;

 private:
  // The first n bytes of a member, inflated when it is deflated.
  std::string Bytes(const NpzMember& m, const std::string& what, uint64_t n) const;

  std::string path_;
  const uint8_t* data_;
  std::unique_ptr<MappedFile> map_;  // with Open
  std::vector<NpzMember> members_;
};

// Reads every member of an archive, in the archive's order. `path` names the file in errors.
std::vector<NpyArray> ParseNpz(const std::string& path, const uint8_t* data, size_t size);
std::vector<NpyArray> ReadNpz(const std::string& path);

}  // namespace tern::inference
