#include "inference/marian/npz.h"

#include <zlib.h>

#include <bit>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>
#include <utility>

#include "common/checksum.h"
#include "common/error.h"
#include "common/file_io.h"

namespace tern::inference {
namespace {

static_assert(std::endian::native == std::endian::little, ".npz arrays are read as little-endian");

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr size_t kLocalHeader = 30, kCentralHeader = 46, kEndRecord = 22;
constexpr uint16_t kDosDate1980 = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: reproducible bytes
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyAlignment = 64;

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The .npy bytes of one array (format 1.0).
std::string NpyBytes(const NpyArray& a) {
  std::string header = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i) header += std::to_string(a.shape[i]) + ", ";
  if (a.shape.size() > 1) header.resize(header.size() - 2);  // (3, 4) but (3,)
  if (a.shape.size() == 1) header.pop_back();
  header += "), }";
  const size_t prefix = 6 + 2 + 2;  // magic, version, header length
  size_t total = prefix + header.size() + 1;
  total = (total + kNpyAlignment - 1) / kNpyAlignment * kNpyAlignment;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  CHECK_LE(header.size(), size_t{0xffff});
  std::string out(kNpyMagic, 6);
  out += '\x01';
  out += '\x00';
  Put<uint16_t>(&out, static_cast<uint16_t>(header.size()));
  return out + header + a.data;
}

// The value after 'key': in a .npy header dict, as raw text up to the next top-level comma.
std::string HeaderField(const std::string& header, const std::string& key,
                        const std::string& what) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) at = header.find("\"" + key + "\"");
  if (at == std::string::npos) Fail(what, ": .npy header has no '", key, "': ", header);
  size_t colon = header.find(':', at + key.size() + 2);
  if (colon == std::string::npos) Fail(what, ": malformed .npy header: ", header);
  size_t begin = colon + 1;
  while (begin < header.size() && header[begin] == ' ') ++begin;
  size_t end = begin;
  if (end < header.size() && header[end] == '(') {
    end = header.find(')', end);
    if (end == std::string::npos) Fail(what, ": malformed .npy header: ", header);
    return header.substr(begin, end + 1 - begin);
  }
  if (end < header.size() && (header[end] == '\'' || header[end] == '"')) {
    size_t close = header.find(header[end], end + 1);
    if (close == std::string::npos) Fail(what, ": malformed .npy header: ", header);
    return header.substr(begin + 1, close - begin - 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(begin, end - begin);
}

// The bytes of a .npy header a member may need, at most: NumPy writes a few hundred.
constexpr uint64_t kMaxNpyHeader = 1 << 20;
// Deflate's best ratio is about 1032:1; a member claiming more is damaged.
constexpr uint64_t kMaxDeflateRatio = 1032;

// A .npy array's header: its type, shape and where its data starts. `prefix` holds the member's
// first bytes (at least its header, or the whole member when shorter), `member_size` its full size;
// `what` is "<path>: member '<name>'".
struct NpyHeader {
  std::string descr;
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;
};

// How many bytes of a member its header takes (the 10 or 12 bytes before the dict, the dict), from
// the first 12 bytes.
uint64_t NpyHeaderBytes(const std::string& what, std::string_view start, uint64_t member_size) {
  if (start.size() < 10 || start.compare(0, 6, std::string_view(kNpyMagic, 6)) != 0) {
    Fail(what, " is not a .npy array (no \\x93NUMPY magic)");
  }
  const uint8_t major = static_cast<uint8_t>(start[6]);
  if (major == 1)
    return 10 + uint64_t{Load<uint16_t>(reinterpret_cast<const uint8_t*>(start.data()) + 8)};
  if (major != 2 && major != 3)
    Fail(what, ": .npy format version ", +major, " is not supported (1 to 3 are)");
  if (start.size() < 12) Fail(what, ": truncated .npy header");
  const uint64_t length = Load<uint32_t>(reinterpret_cast<const uint8_t*>(start.data()) + 8);
  if (length > kMaxNpyHeader || 12 + length > member_size) Fail(what, ": truncated .npy header");
  return 12 + length;
}

NpyHeader ParseNpyHeader(const std::string& what, std::string_view prefix, uint64_t member_size) {
  NpyHeader h;
  h.data_offset = NpyHeaderBytes(what, prefix, member_size);
  if (h.data_offset > member_size || h.data_offset > prefix.size())
    Fail(what, ": truncated .npy header");
  const std::string header(
      prefix.substr(prefix[6] == 1 ? 10 : 12, h.data_offset - (prefix[6] == 1 ? 10 : 12)));
  h.descr = HeaderField(header, "descr", what);
  if (h.descr.size() < 3 || (h.descr[0] != '<' && h.descr[0] != '|' && h.descr[0] != '=')) {
    Fail(what, ": dtype '", h.descr, "' is not a little-endian array type");
  }
  if (h.descr[0] == '=') h.descr[0] = '<';
  const NpyArray typed{"", h.descr, {}, {}};
  if (typed.item_size() <= 0) Fail(what, ": dtype '", h.descr, "' is not supported");
  if (HeaderField(header, "fortran_order", what) != "False") {
    Fail(what, ": Fortran-order arrays are not supported; save it in C order");
  }
  const std::string shape = HeaderField(header, "shape", what);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    Fail(what, ": malformed shape ", shape);
  }
  uint64_t numel = 1;
  for (size_t i = 1; i + 1 < shape.size();) {
    while (i + 1 < shape.size() && (shape[i] == ' ' || shape[i] == ',')) ++i;
    if (i + 1 >= shape.size()) break;
    if (!std::isdigit(static_cast<unsigned char>(shape[i])))
      Fail(what, ": malformed shape ", shape);
    uint64_t dim = 0;
    while (std::isdigit(static_cast<unsigned char>(shape[i]))) {
      dim = dim * 10 + static_cast<uint64_t>(shape[i++] - '0');
      if (dim > (uint64_t{1} << 40)) Fail(what, ": absurd shape ", shape);
    }
    if (dim > 0 && numel > (uint64_t{1} << 40) / dim) Fail(what, ": absurd shape ", shape);
    numel *= dim;
    h.shape.push_back(static_cast<int64_t>(dim));
  }
  const uint64_t need = numel * static_cast<uint64_t>(typed.item_size());
  if (member_size - h.data_offset != need) {
    Fail(what, ": holds ", member_size - h.data_offset, " data bytes, but its shape ",
         ShapeString(h.shape), " of '", h.descr, "' needs ", need);
  }
  return h;
}

// The first `out_size` bytes the deflate stream inflates to (all of it when out_size is its size;
// then the stream must end there).
std::string Inflate(const std::string& what, const uint8_t* in, size_t in_size, size_t out_size,
                    bool whole) {
  std::string out(out_size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) Fail(what, ": cannot start zlib");
  z.next_in = const_cast<Bytef*>(in);
  z.avail_in = static_cast<uInt>(in_size);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out_size);
  const int rc = inflate(&z, whole ? Z_FINISH : Z_SYNC_FLUSH);
  const size_t produced = out_size - z.avail_out;
  inflateEnd(&z);
  if (produced != out_size || (whole ? rc != Z_STREAM_END : rc != Z_OK && rc != Z_STREAM_END)) {
    Fail(what, ": corrupted deflate data (zlib: ", rc, "); the archive is damaged");
  }
  return out;
}

}  // namespace

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int NpyArray::item_size() const {
  if (descr.size() < 3) return 0;
  char* end = nullptr;
  long size = std::strtol(descr.c_str() + 2, &end, 10);
  if (*end != '\0' || size <= 0 || size > 16) return 0;
  if (std::string("fiubc").find(descr[1]) == std::string::npos) return 0;
  return static_cast<int>(size);
}

NpyArray NpyArray::Float32(std::string name, std::vector<int64_t> shape, const float* values) {
  NpyArray a{std::move(name), "<f4", std::move(shape), {}};
  if (a.numel() > 0)
    a.data.assign(reinterpret_cast<const char*>(values), a.numel() * sizeof(float));
  return a;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string SerializeNpz(const std::vector<NpyArray>& arrays) {
  std::string out, central;
  std::set<std::string> names;
  for (const NpyArray& a : arrays) {
    CHECK(!a.name.empty() && names.insert(a.name).second)
        << "bad or repeated array name " << a.name;
    CHECK_EQ(a.data.size(), static_cast<size_t>(a.numel() * a.item_size())) << a.name;
    const std::string name = a.name + ".npy";
    const std::string body = NpyBytes(a);
    if (out.size() + body.size() + name.size() + kLocalHeader >= 0xffffffffu) {
      Fail("the .npz archive would exceed 4 GiB, which needs ZIP64 (not written by Tern)");
    }
    const uint32_t offset = static_cast<uint32_t>(out.size());
    const uint32_t crc = Crc32(body.data(), body.size());
    const uint32_t size = static_cast<uint32_t>(body.size());
    Put<uint32_t>(&out, kLocalSig);
    for (uint16_t v : {uint16_t{20}, uint16_t{0}, uint16_t{0}, uint16_t{0}, kDosDate1980}) {
      Put<uint16_t>(&out, v);  // version needed, flags, method (stored), time, date
    }
    for (uint32_t v : {crc, size, size}) Put<uint32_t>(&out, v);
    Put<uint16_t>(&out, static_cast<uint16_t>(name.size()));
    Put<uint16_t>(&out, 0);  // extra field length
    out += name + body;

    Put<uint32_t>(&central, kCentralSig);
    for (uint16_t v :
         {uint16_t{20}, uint16_t{20}, uint16_t{0}, uint16_t{0}, uint16_t{0}, kDosDate1980}) {
      Put<uint16_t>(&central, v);  // made by, needed, flags, method, time, date
    }
    for (uint32_t v : {crc, size, size}) Put<uint32_t>(&central, v);
    Put<uint16_t>(&central, static_cast<uint16_t>(name.size()));
    for (int i = 0; i < 4; ++i) Put<uint16_t>(&central, 0);  // extra, comment, disk, int. attr
    Put<uint32_t>(&central, 0);                              // external attributes
    Put<uint32_t>(&central, offset);
    central += name;
  }
  if (arrays.size() >= 0xffff || out.size() + central.size() >= 0xffffffffu) {
    Fail("the .npz archive is too large for a zip file without ZIP64 (not written by Tern)");
  }
  const uint32_t central_offset = static_cast<uint32_t>(out.size());
  out += central;
  Put<uint32_t>(&out, kEndSig);
  Put<uint16_t>(&out, 0);
  Put<uint16_t>(&out, 0);
  Put<uint16_t>(&out, static_cast<uint16_t>(arrays.size()));
  Put<uint16_t>(&out, static_cast<uint16_t>(arrays.size()));
  Put<uint32_t>(&out, static_cast<uint32_t>(central.size()));
  Put<uint32_t>(&out, central_offset);
  Put<uint16_t>(&out, 0);  // comment length
  return out;
}

void WriteNpz(const std::string& path, const std::vector<NpyArray>& arrays) {
  WriteFileAtomic(path, SerializeNpz(arrays));
}

NpzArchive::NpzArchive(std::string path, const uint8_t* data, size_t size)
    : path_(std::move(path)), data_(data) {
  const std::string& p = path_;
  // The end-of-central-directory record sits in the last 22 + 65535 (comment) bytes.
  size_t end = std::string::npos;
  for (size_t back = kEndRecord; back <= size && back <= kEndRecord + 0xffff; ++back) {
    if (Load<uint32_t>(data + size - back) == kEndSig) {
      end = size - back;
      break;
    }
  }
  if (end == std::string::npos) {
    Fail(p,
         ": not a complete .npz archive (no zip end-of-central-directory record); the file "
         "is truncated or not an .npz");
  }
  uint64_t count = Load<uint16_t>(data + end + 10);
  uint64_t central_size = Load<uint32_t>(data + end + 12);
  uint64_t central_offset = Load<uint32_t>(data + end + 16);
  if ((count == 0xffff || central_offset == 0xffffffffu) && end >= 20 &&
      Load<uint32_t>(data + end - 20) == kZip64LocatorSig) {
    const uint64_t z64 = Load<uint64_t>(data + end - 20 + 8);
    if (z64 > end || end - z64 < 56 || Load<uint32_t>(data + z64) != kZip64EndSig) {
      Fail(p, ": corrupted .npz archive: bad ZIP64 end record");
    }
    count = Load<uint64_t>(data + z64 + 32);
    central_size = Load<uint64_t>(data + z64 + 40);
    central_offset = Load<uint64_t>(data + z64 + 48);
  }
  if (central_offset > end || central_size > end - central_offset ||
      count > central_size / kCentralHeader) {
    Fail(p, ": truncated or corrupted .npz archive: its directory (", count, " entries at ",
         central_offset, ") lies outside the ", size, "-byte file");
  }
  std::set<std::string> seen;
  size_t pos = central_offset;
  const size_t central_end = central_offset + central_size;
  for (uint64_t i = 0; i < count; ++i) {
    if (central_end - pos < kCentralHeader || Load<uint32_t>(data + pos) != kCentralSig) {
      Fail(p, ": corrupted .npz archive: directory entry ", i, " is damaged");
    }
    NpzMember m;
    const uint16_t flags = Load<uint16_t>(data + pos + 8);
    m.method = Load<uint16_t>(data + pos + 10);
    m.crc = Load<uint32_t>(data + pos + 16);
    m.packed = Load<uint32_t>(data + pos + 20);
    m.unpacked = Load<uint32_t>(data + pos + 24);
    const size_t name_len = Load<uint16_t>(data + pos + 28);
    const size_t extra_len = Load<uint16_t>(data + pos + 30);
    const size_t comment_len = Load<uint16_t>(data + pos + 32);
    uint64_t local = Load<uint32_t>(data + pos + 42);
    if (central_end - pos - kCentralHeader < name_len + extra_len + comment_len) {
      Fail(p, ": corrupted .npz archive: directory entry ", i, " runs past the directory");
    }
    std::string name(reinterpret_cast<const char*>(data + pos + kCentralHeader), name_len);
    // ZIP64 extra field (id 1): the 64-bit values of the fields saturated at 0xffffffff, in order.
    for (size_t e = pos + kCentralHeader + name_len;
         e + 4 <= pos + kCentralHeader + name_len + extra_len;) {
      const uint16_t id = Load<uint16_t>(data + e), len = Load<uint16_t>(data + e + 2);
      size_t f = e + 4;
      const size_t f_end = std::min(f + len, pos + kCentralHeader + name_len + extra_len);
      if (id == 1) {
        for (uint64_t* field : {&m.unpacked, &m.packed, &local}) {
          if (*field == 0xffffffffu && f + 8 <= f_end) {
            *field = Load<uint64_t>(data + f);
            f += 8;
          }
        }
      }
      e += 4 + len;
    }
    pos += kCentralHeader + name_len + extra_len + comment_len;

    const std::string what = p + ": member '" + name + "'";
    if (flags & 1) Fail(what, " is encrypted");
    if (m.method != 0 && m.method != 8) {
      Fail(what, " uses zip compression method ", m.method, " (only stored and deflate are read)");
    }
    if (local > central_offset || central_offset - local < kLocalHeader ||
        Load<uint32_t>(data + local) != kLocalSig) {
      Fail(p, ": truncated or corrupted .npz archive: member '", name, "' has no local header");
    }
    m.start = local + kLocalHeader + Load<uint16_t>(data + local + 26) +
              Load<uint16_t>(data + local + 28);
    if (m.start > central_offset || m.packed > central_offset - m.start) {
      Fail(p, ": truncated or corrupted .npz archive: member '", name, "' (", m.packed,
           " bytes) runs past the end of the data");
    }
    if (m.method == 8 && (m.packed > 0xffffffffu || m.unpacked > 0xffffffffu)) {
      Fail(what, " is a deflated member over 4 GiB; store it uncompressed (numpy.savez)");
    }
    // Sizes deflate cannot reach are damage, found before anything is inflated.
    if (m.unpacked > (uint64_t{1} << 40) || (m.method == 0 && m.packed != m.unpacked) ||
        (m.method == 8 && m.unpacked / kMaxDeflateRatio > m.packed + 1)) {
      Fail(what, " has inconsistent sizes (", m.packed, " packed, ", m.unpacked, " unpacked)");
    }
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0) {
      Fail(what, " is not a .npy array (an .npz holds NAME.npy members only)");
    }
    // The .npy header only: its first 12 bytes say how long it is.
    const std::string start = Bytes(m, what, std::min<uint64_t>(12, m.unpacked));
    const uint64_t header = NpyHeaderBytes(what, start, m.unpacked);
    const NpyHeader h =
        ParseNpyHeader(what, Bytes(m, what, std::min(header, m.unpacked)), m.unpacked);
    m.descr = h.descr;
    m.shape = h.shape;
    m.data_offset = h.data_offset;
    name.resize(name.size() - 4);
    if (!seen.insert(name).second) Fail(p, ": array '", name, "' appears twice");
    m.name = std::move(name);
    members_.push_back(std::move(m));
  }
}

std::unique_ptr<NpzArchive> NpzArchive::Open(const std::string& path) {
  auto map = std::make_unique<MappedFile>(path);
  std::unique_ptr<NpzArchive> archive(new NpzArchive(path, map->data(), map->size()));
  archive->map_ = std::move(map);
  return archive;
}

std::string NpzArchive::Bytes(const NpzMember& m, const std::string& what, uint64_t n) const {
  const uint8_t* in = data_ + m.start;
  if (m.method == 0) return std::string(reinterpret_cast<const char*>(in), n);
  return Inflate(what, in, m.packed, n, /*whole=*/n == m.unpacked);
}

NpyArray NpzArchive::Read(size_t index) const {
  const NpzMember& m = members_.at(index);
  const std::string what = path_ + ": member '" + m.name + ".npy'";
  std::string bytes = Bytes(m, what, m.unpacked);
  if (Crc32(bytes.data(), bytes.size()) != m.crc) {
    Fail(what, ": checksum mismatch; the archive is damaged");
  }
  bytes.erase(0, m.data_offset);  // in place: members can be large
  return NpyArray{m.name, m.descr, m.shape, std::move(bytes)};
}

std::vector<NpyArray> ParseNpz(const std::string& path, const uint8_t* data, size_t size) {
  const NpzArchive archive(path, data, size);
  std::vector<NpyArray> arrays;
  for (size_t i = 0; i < archive.members().size(); ++i) arrays.push_back(archive.Read(i));
  return arrays;
}

std::vector<NpyArray> ReadNpz(const std::string& path) {
  MappedFile map(path);
  return ParseNpz(path, map.data(), map.size());
}

}  // namespace tern::inference
