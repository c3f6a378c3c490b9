#include "inference/format/model_file.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "common/checksum.h"
#include "common/error.h"
#include "configs/config_io.h"
#include "tensor/cpu/int_gemm.h"

namespace tern::inference {
namespace {

static_assert(std::endian::native == std::endian::little, "the .tern format is little-endian");

constexpr size_t kFixedHeader = 24;  // magic, version, reserved, file size
constexpr size_t kTrailer = 4;       // CRC-32
constexpr uint32_t kMaxNameBytes = 4096;

template <typename T>
void Put(std::string* out, T value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

void PadTo(std::string* out, size_t alignment) {
  out->resize((out->size() + alignment - 1) / alignment * alignment, '\0');
}

const char* FileDTypeName(uint8_t code) {
  switch (code) {
    case 0:
      return "float32";
    case 1:
      return "int16";
    case 2:
      return "int8";
    case 3:
      return "int32";
    default:
      return "unknown";
  }
}

// Reads fields from [data, data + size), failing with "<path>: corrupted model file: <what>"
// rather than reading past the end.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size, size_t pos)
      : path_(path), data_(data), size_(size), pos_(pos) {}

  template <typename T>
  T Read(const char* what) {
    Need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string_view Bytes(uint64_t n, const char* what) {
    Need(n, what);
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void Need(uint64_t n, const char* what) {
    if (n > size_ - pos_) {
      Fail(path_, ": corrupted model file: ", what, " (", n, " bytes) runs past the end of the ",
           "header; re-export the model");
    }
  }
  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_;
};

// A quantized tensor must be a matrix with a usable scale whose values stay within the range the
// integer GEMM's overflow bound allows for its row count.
void CheckQuantized(const std::string& path, const TensorEntry& e, const uint8_t* data) {
  const char* type = FileDTypeName(static_cast<uint8_t>(e.dtype));
  if (e.shape.rank() != 2) {
    Fail(path, ": corrupted model file: ", type, " tensor '", e.name, "' has shape ",
         e.shape.ToString(), "; quantized tensors are weight matrices (in, out)");
  }
  if (!(e.scale > 0.f) || !std::isfinite(e.scale)) {
    Fail(path, ": corrupted model file: ", type, " tensor '", e.name, "' has quantization scale ",
         e.scale, "; it must be a positive finite number (re-export the model)");
  }
  const bool int16 = e.dtype == FileDType::kInt16;
  const int64_t k = e.shape[0];
  const int32_t range =
      cpu::WeightQuantRange(int16 ? cpu::IntType::kInt16 : cpu::IntType::kInt8, k);
  const int64_t n = e.shape.numel();
  for (int64_t i = 0; i < n; ++i) {
    int32_t v;
    if (int16) {
      int16_t x;
      std::memcpy(&x, data + 2 * i, 2);
      v = x;
    } else {
      v = static_cast<int8_t>(data[i]);
    }
    if (v > range || v < -range) {
      Fail(path, ": corrupted model file: ", type, " tensor '", e.name, "' holds ", v,
           " at element ", i, ", outside +-", range,
           " (the bound that keeps its products from overflowing); re-export the model");
    }
  }
}

// The frame around everything else: magic, version, the declared size against the file's, the
// CRC-32 trailer. Returns the size of the body (the bytes before the trailer).
size_t CheckFrame(const std::string& path, const uint8_t* data, size_t size) {
  if (size < sizeof(kModelMagic) || std::memcmp(data, kModelMagic, sizeof(kModelMagic)) != 0) {
    Fail(path, ": not a Tern model file (no TERNMODL magic); export one with tern-export");
  }
  if (size < kFixedHeader + kTrailer) {
    Fail(path, ": truncated model file (", size, " bytes); copy or export it again");
  }
  uint32_t version;
  std::memcpy(&version, data + 8, 4);
  if (version > kModelFormatVersion) {
    Fail(path, ": model file format version ", version,
         " is newer than this Tern reads (up to version ", kModelFormatVersion,
         "); use a newer tern or re-export with this one");
  }
  if (version == 0) Fail(path, ": corrupted model file: format version 0");
  uint64_t declared_size;
  std::memcpy(&declared_size, data + 16, 8);
  if (declared_size > size) {
    Fail(path, ": truncated model file (", size, " of ", declared_size,
         " bytes); copy or export it again");
  }
  if (declared_size != size) {
    Fail(path, ": corrupted model file: header says ", declared_size, " bytes, file has ", size);
  }
  const size_t body = size - kTrailer;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, data + body, 4);
  if (Crc32(data, body) != stored_crc) {
    Fail(path, ": corrupted model file: checksum mismatch; copy or export it again");
  }
  return body;
}

// What the header says before the tensor table.
struct Description {
  std::string arch;
  uint32_t arch_revision = 0;
  config::TrainConfig config;
  std::string_view vocab;  // a view into the file
};

// The architecture name and revision, the embedded config (which must name that architecture)
// and the vocabulary.
Description ReadDescription(Cursor& in) {
  const std::string& path = in.path();
  Description d;
  const uint32_t arch_len = in.Read<uint32_t>("architecture name length");
  if (arch_len > kMaxNameBytes) Fail(path, ": corrupted model file: architecture name too long");
  d.arch = std::string(in.Bytes(arch_len, "architecture name"));
  d.arch_revision = in.Read<uint32_t>("architecture revision");
  const uint32_t known = ArchRevision(d.arch);
  if (d.arch_revision > known) {
    Fail(path, ": architecture '", d.arch, "' revision ", d.arch_revision,
         " is newer than this Tern runs (up to ", known, "); use a newer tern");
  }
  const uint64_t config_len = in.Read<uint64_t>("config length");
  std::string config_text(in.Bytes(config_len, "config"));
  std::string error;
  if (!config::ParseTrainConfig(config_text, path + " (embedded config)", &d.config, &error)) {
    Fail(path, ": corrupted model file: embedded config: ", error);
  }
  if (d.config.model().arch() != d.arch) {
    Fail(path, ": corrupted model file: architecture '", d.arch, "' but config says '",
         d.config.model().arch(), "'");
  }
  const uint64_t vocab_len = in.Read<uint64_t>("vocabulary length");
  d.vocab = in.Bytes(vocab_len, "vocabulary");
  return d;
}

// Entry `index` of the tensor table, checked on its own: name (length, not in `seen`, which it
// joins), dtype, rank, dims, size against the shape, offset aligned and data inside the body.
TensorEntry ReadTensorEntry(Cursor& in, uint32_t index, std::set<std::string>* seen) {
  const std::string& path = in.path();
  TensorEntry e;
  const uint32_t name_len = in.Read<uint32_t>("tensor name length");
  if (name_len == 0 || name_len > kMaxNameBytes) {
    Fail(path, ": corrupted model file: tensor ", index, " has a name of ", name_len, " bytes");
  }
  e.name = std::string(in.Bytes(name_len, "tensor name"));
  if (!seen->insert(e.name).second) {
    Fail(path, ": corrupted model file: tensor '", e.name, "' appears twice");
  }
  const uint8_t dtype = in.Read<uint8_t>("tensor dtype");
  const uint8_t rank = in.Read<uint8_t>("tensor rank");
  in.Read<uint16_t>("reserved");
  if (dtype > 3) Fail(path, ": corrupted model file: tensor '", e.name, "' has dtype ", +dtype);
  if (rank > Shape::kMaxRank) {
    Fail(path, ": corrupted model file: tensor '", e.name, "' has rank ", +rank);
  }
  e.dtype = static_cast<FileDType>(dtype);
  std::vector<int64_t> dims;
  uint64_t numel = 1;
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = in.Read<int64_t>("tensor dim");
    if (dim < 0 || (dim > 0 && numel > std::numeric_limits<uint64_t>::max() / 8 /
                                           static_cast<uint64_t>(dim))) {
      Fail(path, ": corrupted model file: tensor '", e.name, "' has an absurd shape");
    }
    numel *= static_cast<uint64_t>(dim);
    dims.push_back(dim);
  }
  e.shape = Shape(dims);
  e.scale = in.Read<float>("tensor scale");
  e.offset = in.Read<uint64_t>("tensor offset");
  e.size = in.Read<uint64_t>("tensor size");
  const uint64_t element = dtype == 0 || dtype == 3 ? 4 : dtype == 1 ? 2 : 1;
  if (e.size != numel * element) {
    Fail(path, ": corrupted model file: tensor '", e.name, "' size ", e.size,
         " does not match its shape ", e.shape.ToString());
  }
  const size_t body = in.size();
  if (e.offset % kModelTensorAlignment != 0 || e.offset > body || e.size > body - e.offset) {
    Fail(path, ": corrupted model file: tensor '", e.name, "' lies outside the file (offset ",
         e.offset, ", size ", e.size, ")");
  }
  return e;
}

// The tensor count (against the room left for entries), then every entry.
std::vector<TensorEntry> ReadTensorTable(Cursor& in) {
  const uint32_t count = in.Read<uint32_t>("tensor count");
  constexpr size_t kMinEntry = 4 + 1 + 4 + 4 + 8 + 8;
  if (count > in.left() / kMinEntry) {
    Fail(in.path(), ": corrupted model file: tensor count ", count, " does not fit the header");
  }
  std::vector<TensorEntry> table;
  table.reserve(count);
  std::set<std::string> seen;
  for (uint32_t i = 0; i < count; ++i) table.push_back(ReadTensorEntry(in, i, &seen));
  return table;
}

}  // namespace

bool RuntimeSupports(const std::string& arch) {
  return arch == "transformer" || arch == "aan" || arch == "s2s" || arch == "devlin";
}

uint32_t ArchRevision(const std::string& arch) {
  if (RuntimeSupports(arch)) return 1;
  Fail("model architecture '", arch,
       "' cannot be exported or run by this runtime (known: transformer, aan, s2s, devlin)");
}

std::string SerializeModelFile(const config::TrainConfig& config, std::string_view vocab_bytes,
                               const std::vector<NamedTensor>& tensors) {
  const std::string& arch = config.model().arch();
  const uint32_t revision = ArchRevision(arch);
  const std::string config_text = config::ToText(config);

  std::string out;
  out.append(kModelMagic, sizeof(kModelMagic));
  Put<uint32_t>(&out, kModelFormatVersion);
  Put<uint32_t>(&out, 0);
  Put<uint64_t>(&out, 0);  // file size, patched below
  Put<uint32_t>(&out, static_cast<uint32_t>(arch.size()));
  out += arch;
  Put<uint32_t>(&out, revision);
  Put<uint64_t>(&out, config_text.size());
  out += config_text;
  Put<uint64_t>(&out, vocab_bytes.size());
  out += vocab_bytes;
  Put<uint32_t>(&out, static_cast<uint32_t>(tensors.size()));

  // The table is written before the data, so compute the data offsets first.
  size_t table_bytes = 0;
  for (const NamedTensor& t : tensors) {
    const DType dt = t.tensor.dtype();
    CHECK(((dt == DType::kFloat32 || dt == DType::kInt32) && t.scale == 1.f) ||
          ((dt == DType::kInt16 || dt == DType::kInt8) && t.tensor.rank() == 2 && t.scale > 0.f))
        << "WriteModelFile: tensor " << t.name << " must be float32 or int32, or an int16/int8 "
        << "matrix with a positive scale";
    CHECK(t.tensor.device() == Device::kCpu)
        << "WriteModelFile: tensor " << t.name << " not on CPU";
    CHECK(!t.name.empty() && t.name.size() <= kMaxNameBytes) << "bad tensor name " << t.name;
    table_bytes += 4 + t.name.size() + 4 + 8 * t.tensor.rank() + 4 + 8 + 8;
  }
  auto align = [](size_t n) {
    return (n + kModelTensorAlignment - 1) / kModelTensorAlignment * kModelTensorAlignment;
  };
  std::vector<uint64_t> offsets;
  size_t cursor = align(out.size() + table_bytes);
  for (const NamedTensor& t : tensors) {
    offsets.push_back(cursor);
    cursor = align(cursor + t.tensor.bytes());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].tensor;
    Put<uint32_t>(&out, static_cast<uint32_t>(tensors[i].name.size()));
    out += tensors[i].name;
    const FileDType code = t.dtype() == DType::kInt16   ? FileDType::kInt16
                           : t.dtype() == DType::kInt8  ? FileDType::kInt8
                           : t.dtype() == DType::kInt32 ? FileDType::kInt32
                                                        : FileDType::kFloat32;
    Put<uint8_t>(&out, static_cast<uint8_t>(code));
    Put<uint8_t>(&out, static_cast<uint8_t>(t.rank()));
    Put<uint16_t>(&out, 0);
    for (int d = 0; d < t.rank(); ++d) Put<int64_t>(&out, t.dim(d));
    Put<float>(&out, tensors[i].scale);
    Put<uint64_t>(&out, offsets[i]);
    Put<uint64_t>(&out, t.bytes());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    PadTo(&out, kModelTensorAlignment);
    CHECK_EQ(out.size(), offsets[i]);
    out.append(static_cast<const char*>(tensors[i].tensor.raw()), tensors[i].tensor.bytes());
  }
  const uint64_t file_size = out.size() + kTrailer;
  std::memcpy(out.data() + 16, &file_size, sizeof(file_size));
  Put<uint32_t>(&out, Crc32(out.data(), out.size()));
  return out;
}

void WriteModelFile(const std::string& path, const config::TrainConfig& config,
                    std::string_view vocab_bytes, const std::vector<NamedTensor>& tensors) {
  WriteFileAtomic(path, SerializeModelFile(config, vocab_bytes, tensors));
}

ModelFile::ModelFile(const std::string& path) : map_(path), weights_(path) {}

std::unique_ptr<ModelFile> ModelFile::Open(const std::string& path) {
  std::unique_ptr<ModelFile> file(new ModelFile(path));
  file->Parse();
  return file;
}

void ModelFile::Parse() {
  const std::string& path = map_.path();
  const size_t body = CheckFrame(path, map_.data(), map_.size());
  Cursor in(path, map_.data(), body, kFixedHeader);
  Description description = ReadDescription(in);
  arch_ = std::move(description.arch);
  arch_revision_ = description.arch_revision;
  config_ = std::move(description.config);
  vocab_ = description.vocab;
  table_ = ReadTensorTable(in);
  AddWeights(in.pos());
  CheckColumnScales(path);
}

void ModelFile::AddWeights(size_t header_end) {
  const std::string& path = map_.path();
  const uint8_t* data = map_.data();
  for (const TensorEntry& e : table_) {
    if (e.size > 0 && e.offset < header_end) {
      Fail(path, ": corrupted model file: tensor '", e.name, "' overlaps the header");
    }
    // The mapping is read-only; the runtime never writes through weight views.
    void* p = const_cast<uint8_t*>(data + e.offset);
    if (e.dtype == FileDType::kFloat32 || e.dtype == FileDType::kInt32) {
      weights_.Add(
          e.name, Tensor(p, e.shape, e.dtype == FileDType::kInt32 ? DType::kInt32 : DType::kFloat32,
                         Device::kCpu));
      continue;
    }
    CheckQuantized(path, e, data + e.offset);
    const DType dt = e.dtype == FileDType::kInt16 ? DType::kInt16 : DType::kInt8;
    weights_.Add(e.name, Tensor(p, e.shape, dt, Device::kCpu), e.scale);
  }
}

void ModelFile::CheckColumnScales(const std::string& path) const {
  for (const TensorEntry& e : table_) {
    const std::string suffix = kColumnScalesSuffix;
    if (e.name.size() <= suffix.size() ||
        e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string matrix = e.name.substr(0, e.name.size() - suffix.size());
    const bool quantized = weights_.Has(matrix) && (weights_.Get(matrix).dtype() == DType::kInt16 ||
                                                    weights_.Get(matrix).dtype() == DType::kInt8);
    if (!quantized) {
      Fail(path, ": corrupted model file: '", e.name, "' has no int16/int8 matrix '", matrix,
           "' to scale");
    }
    const Tensor& scales = weights_.Get(e.name);
    if (scales.dtype() != DType::kFloat32 || scales.rank() != 1 ||
        scales.dim(0) != weights_.Get(matrix).dim(1)) {
      Fail(path, ": corrupted model file: '", e.name, "' has shape ", scales.shape().ToString(),
           "; it must be float32 (", weights_.Get(matrix).dim(1), "), one scale per column");
    }
    for (int64_t j = 0; j < scales.numel(); ++j) {
      if (!(scales.f32()[j] > 0.f) || !std::isfinite(scales.f32()[j])) {
        Fail(path, ": corrupted model file: '", e.name, "' holds ", scales.f32()[j], " at column ",
             j, "; scales must be positive finite numbers (re-export the model)");
      }
    }
  }
}

}  // namespace tern::inference
