#include "tensor/tensor.h"

#include <cstring>
#include <sstream>

#include "common/error.h"
#include "tensor/allocator.h"

namespace tern {

size_t SizeOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kInt16:
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
    case DType::kInt8:
      return 1;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt32:
      return "int32";
    case DType::kInt16:
      return "int16";
    case DType::kInt8:
      return "int8";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "?";
}

const char* DeviceName(Device device) { return device == Device::kCpu ? "cpu" : "cuda"; }

Shape::Shape(std::initializer_list<int64_t> dims) {
  CHECK_LE(static_cast<int>(dims.size()), kMaxRank);
  for (int64_t d : dims) dims_[rank_++] = d;
}

Shape::Shape(const std::vector<int64_t>& dims) {
  CHECK_LE(static_cast<int>(dims.size()), kMaxRank);
  for (int64_t d : dims) dims_[rank_++] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

std::string Shape::ToString() const {
  std::ostringstream out;
  out << "(";
  for (int i = 0; i < rank_; ++i) out << (i ? ", " : "") << dims_[i];
  out << ")";
  return out.str();
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[i] != o.dims_[i]) return false;
  return true;
}

Storage::Storage(size_t bytes, Device device) : Storage(bytes, AllocatorFor(device)) {}

Storage::Storage(size_t bytes, Allocator* allocator)
    : bytes_(bytes), device_(allocator->device()), allocator_(allocator) {
  data_ = allocator->Allocate(bytes);
}

Storage::~Storage() { allocator_->Free(data_); }

Tensor Tensor::Empty(const Shape& shape, DType dtype, Device device) {
  auto storage =
      std::make_shared<Storage>(std::max<size_t>(shape.numel() * SizeOf(dtype), 1), device);
  Tensor t(storage->data(), shape, dtype, device);
  t.storage_ = std::move(storage);
  return t;
}

Tensor Tensor::PinnedZeros(const Shape& shape, DType dtype) {
  auto storage = std::make_shared<Storage>(std::max<size_t>(shape.numel() * SizeOf(dtype), 1),
                                           PinnedHostAllocator());
  Tensor t(storage->data(), shape, dtype, Device::kCpu);
  t.storage_ = std::move(storage);
  std::memset(t.raw(), 0, t.bytes());
  return t;
}

Tensor Tensor::Zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = Empty(shape, dtype, device);
  ZeroBytes(t.raw(), device, t.bytes());  // on a GPU queued, not waited for
  return t;
}

Tensor Tensor::FromVector(const Shape& shape, const std::vector<float>& values) {
  CHECK_EQ(shape.numel(), static_cast<int64_t>(values.size()));
  Tensor t = Empty(shape);
  std::memcpy(t.raw(), values.data(), t.bytes());
  return t;
}

Tensor Tensor::FromInts(const Shape& shape, const std::vector<int32_t>& values) {
  CHECK_EQ(shape.numel(), static_cast<int64_t>(values.size()));
  Tensor t = Empty(shape, DType::kInt32);
  std::memcpy(t.raw(), values.data(), t.bytes());
  return t;
}

Tensor Tensor::Reshape(const Shape& shape) const {
  CHECK_EQ(shape.numel(), numel())
      << "cannot reshape " << shape_.ToString() << " to " << shape.ToString();
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= dim(0))
      << "bad slice [" << begin << ", " << end << ") of " << shape_.ToString();
  Tensor t = *this;
  int64_t row_elems = dim(0) == 0 ? 0 : numel() / dim(0);
  t.data_ = static_cast<char*>(data_) + begin * row_elems * SizeOf(dtype_);
  t.shape_.set_dim(0, end - begin);
  return t;
}

std::vector<float> Tensor::ToVector() const {
  CHECK(dtype_ == DType::kFloat32);
  std::vector<float> v(numel());
  CopyBytes(v.data(), Device::kCpu, data_, device_, bytes());
  return v;
}

std::string Tensor::DebugString(int max_values) const {
  std::ostringstream out;
  out << "Tensor" << shape_.ToString() << " " << DTypeName(dtype_) << " " << DeviceName(device_);
  if (dtype_ == DType::kFloat32 && defined_) {
    std::vector<float> v = ToVector();
    out << " [";
    for (int i = 0; i < std::min<int64_t>(max_values, numel()); ++i) out << (i ? ", " : "") << v[i];
    if (numel() > max_values) out << ", ...";
    out << "]";
  }
  return out.str();
}

}  // namespace tern
