// The exported model file (*.tern), format version 2 (docs/design.md "The model file").
//
// Layout, all integers little-endian:
//   0   char[8]  magic "TERNMODL"
//   8   u32      format version (2 written; 1 and 2 read)
//   12  u32      reserved (0)
//   16  u64      file size in bytes, trailer included (tells truncation apart from corruption)
//   24  u32 len + bytes   architecture name ("transformer", "aan", "s2s" or "devlin")
//       u32               architecture revision
//       u64 len + bytes   effective config, protobuf text of tern::config::TrainConfig
//       u64 len + bytes   vocabulary (SentencePiece serialized model)
//       u32               tensor count, then per tensor:
//         u32 len + bytes name; u8 dtype (0 float32, 1 int16, 2 int8, 3 int32: token-id tables
//         such as lexical shortlists; readers before it reject it by code); u8 rank; u16 reserved;
//         i64 dims[rank]; f32 quantization scale (1 for float32 and int32); u64 offset; u64 size
//   int16/int8 tensors are linear layers' weight matrices (in, out), row-major, value = q / scale,
//   with |q| within tensor/cpu/int_gemm.h's WeightQuantRange(type, in) (so the integer GEMM cannot
//   overflow); the reader checks the scale and every value. Version 2 adds per-column scales: a
//   float32 tensor NAME@column_scales (out) beside int16/int8 NAME, value[:, j] =
//   q[:, j] / (scale * column_scales[j]) (positive and finite, checked). Version 1 files (one
//   scale per matrix) still load.
//   tensor data, each starting at an offset that is a multiple of 64 (so a memory map gives
//   aligned views); zero padding between
//   u32 CRC-32 (common/checksum.h) of every byte before it.
//
// The reader maps the file, checks magic, version, size and checksum, then validates every length,
// offset and size before using it; a bad file ends in one tern::Error line naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_io.h"
#include "configs/tern.pb.h"
#include "inference/format/weights.h"
#include "tensor/tensor.h"

namespace tern::inference {

inline constexpr char kModelMagic[8] = {'T', 'E', 'R', 'N', 'M', 'O', 'D', 'L'};
inline constexpr uint32_t kModelFormatVersion = 2;
inline constexpr size_t kModelTensorAlignment = 64;

// Tensor element types in the file (stable codes, independent of tern::DType's numbering).
enum class FileDType : uint8_t { kFloat32 = 0, kInt16 = 1, kInt8 = 2, kInt32 = 3 };

// The architecture revision this build writes and reads for `arch`; tern::Error for an unknown
// architecture. Bump a revision when an architecture's parameters or computation change.
uint32_t ArchRevision(const std::string& arch);
// Whether this runtime can export and decode `arch` (the trainer validates BLEU only then).
bool RuntimeSupports(const std::string& arch);

struct NamedTensor {
  std::string name;
  Tensor tensor;      // float32 or int32 (token-id tables), or int16/int8 quantized (a 2-D
                      // weight matrix), on the CPU
  float scale = 1.f;  // quantization scale of int16/int8: value = q / scale
};

// The bytes of a model file (what WriteModelFile writes). Architecture from config.model().arch().
std::string SerializeModelFile(const config::TrainConfig& config, std::string_view vocab_bytes,
                               const std::vector<NamedTensor>& tensors);
// Writes the model file atomically (a crash leaves any previous file whole).
void WriteModelFile(const std::string& path, const config::TrainConfig& config,
                    std::string_view vocab_bytes, const std::vector<NamedTensor>& tensors);

// One entry of the tensor table, as read.
struct TensorEntry {
  std::string name;
  FileDType dtype;
  Shape shape;
  float scale;
  uint64_t offset;
  uint64_t size;
};

// A model file opened read-only through a memory map; weights() are views into the mapping and
// live as long as this object.
class ModelFile {
 public:
  // tern::Error (one line naming the path) for a missing, truncated, corrupted or newer file.
  static std::unique_ptr<ModelFile> Open(const std::string& path);

  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const std::string& path() const { return map_.path(); }
  const std::string& arch() const { return arch_; }
  uint32_t arch_revision() const { return arch_revision_; }
  const config::TrainConfig& config() const { return config_; }
  std::string_view vocab() const { return vocab_; }
  const std::vector<TensorEntry>& table() const { return table_; }
  const Weights& weights() const { return weights_; }

 private:
  explicit ModelFile(const std::string& path);
  // Checks the file and reads its header and tensor table (model_file.cc: the frame, the
  // description, each table entry, then the data), filling every member below.
  void Parse();
  // The table's tensors as views into the mapping (after the header, which ends at
  // `header_end`), each quantized one's values checked against their bound.
  void AddWeights(size_t header_end);
  // Every NAME@column_scales names an int16/int8 matrix and holds one positive finite float32
  // per column of it.
  void CheckColumnScales(const std::string& path) const;

  MappedFile map_;
  std::string arch_;
  uint32_t arch_revision_ = 0;
  config::TrainConfig config_;
  std::string_view vocab_;
  std::vector<TensorEntry> table_;
  Weights weights_;
};

}  // namespace tern::inference
