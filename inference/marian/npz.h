// NumPy .npz archives: a zip file whose members "NAME.npy" each hold one array in NumPy's .npy
// format. This is the file format of Marian's models (names.h maps their contents).
//
// Writing: members stored uncompressed, as Marian's cnpy writes them, with a CRC-32 each, little-
// endian C-order arrays, .npy format 1.0 with the header padded to 64 bytes; no ZIP64, so an
// archive stays below 4 GiB. Reading: stored and deflated members (numpy.savez and
// numpy.savez_compressed), ZIP64 sizes and offsets as numpy.savez writes them; every size and
// offset is checked against the file before use, and a bad file ends in one tern::Error line that
// names the file (and the member).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

// Reads every member of an archive, in the archive's order. `path` names the file in errors.
std::vector<NpyArray> ParseNpz(const std::string& path, const uint8_t* data, size_t size);
std::vector<NpyArray> ReadNpz(const std::string& path);

}  // namespace tern::inference
