// Shape, DType, Device and Tensor: a row-major, contiguous view of memory on a device.
//
// A Tensor is a cheap value type. It either views memory owned elsewhere (an Arena, a parameter
// buffer, a memory-mapped file) or shares ownership of a Storage made by Tensor::Empty/Zeros.
// Views (Reshape, Slice along dim 0) never copy.
#pragma once

#include <glog/logging.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace tern {

enum class DType : uint8_t { kFloat32, kInt32, kInt16, kInt8, kBFloat16, kFloat16 };
enum class Device : uint8_t { kCpu, kCuda };

size_t SizeOf(DType dtype);
const char* DTypeName(DType dtype);
const char* DeviceName(Device device);

class Shape {
 public:
  static constexpr int kMaxRank = 6;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  // Negative indices count from the end: dim(-1) is the last.
  int64_t dim(int i) const { return dims_[Index(i)]; }
  int64_t operator[](int i) const { return dim(i); }
  void set_dim(int i, int64_t v) { dims_[Index(i)] = v; }
  int64_t numel() const;
  // Product of all dims but the last: the "rows" of a row-major matrix view.
  int64_t rows() const { return rank_ == 0 ? 1 : numel() / dims_[rank_ - 1]; }
  int64_t cols() const { return rank_ == 0 ? 1 : dims_[rank_ - 1]; }
  std::vector<int64_t> dims() const { return {dims_.begin(), dims_.begin() + rank_}; }
  std::string ToString() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

 private:
  int Index(int i) const {
    int j = i < 0 ? i + rank_ : i;
    CHECK(j >= 0 && j < rank_) << "dim " << i << " out of range for rank " << rank_;
    return j;
  }
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class Allocator;  // tensor/allocator.h

// Memory owned by a device allocator, freed with it.
class Storage {
 public:
  Storage(size_t bytes, Device device);
  // Memory from `allocator` (freed by it), on its device.
  Storage(size_t bytes, Allocator* allocator);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_;
  Allocator* allocator_;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(void* data, const Shape& shape, DType dtype = DType::kFloat32,
         Device device = Device::kCpu)
      : data_(data), shape_(shape), dtype_(dtype), device_(device), defined_(true) {}

  // Owning tensors (general allocator: not for the training or decoding hot path).
  static Tensor Empty(const Shape& shape, DType dtype = DType::kFloat32,
                      Device device = Device::kCpu);
  static Tensor Zeros(const Shape& shape, DType dtype = DType::kFloat32,
                      Device device = Device::kCpu);
  // Zeros in page-locked host memory where a GPU is visible (copies to and from the GPU then run
  // at the link's full rate), in ordinary host memory otherwise: the host side of a GPU run's
  // per-step transfers.
  static Tensor PinnedZeros(const Shape& shape, DType dtype = DType::kFloat32);
  // A CPU float tensor holding `values` (for tests and small constants).
  static Tensor FromVector(const Shape& shape, const std::vector<float>& values);
  static Tensor FromInts(const Shape& shape, const std::vector<int32_t>& values);

  bool defined() const { return defined_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t numel() const { return shape_.numel(); }
  int64_t rows() const { return shape_.rows(); }
  int64_t cols() const { return shape_.cols(); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  size_t bytes() const { return static_cast<size_t>(numel()) * SizeOf(dtype_); }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  float* f32() const {
    CHECK(dtype_ == DType::kFloat32) << "tensor is " << DTypeName(dtype_) << ", not float32";
    return static_cast<float*>(data_);
  }
  int32_t* i32() const {
    CHECK(dtype_ == DType::kInt32) << "tensor is " << DTypeName(dtype_) << ", not int32";
    return static_cast<int32_t*>(data_);
  }

  // Views. REQUIRES: same element count for Reshape; 0 <= begin <= end <= dim(0) for Slice.
  Tensor Reshape(const Shape& shape) const;
  Tensor Slice(int64_t begin, int64_t end) const;
  Tensor Flatten2D() const { return Reshape({rows(), cols()}); }

  // Element access for CPU float tensors (tests, small glue code; not for kernels).
  float at(int64_t flat_index) const { return f32()[flat_index]; }
  std::vector<float> ToVector() const;  // copies to host
  std::string DebugString(int max_values = 8) const;

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
  Device device_ = Device::kCpu;
  bool defined_ = false;
  std::shared_ptr<Storage> storage_;  // null for views of memory owned elsewhere
};

}  // namespace tern
