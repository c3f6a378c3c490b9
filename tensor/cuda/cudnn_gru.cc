// A whole GRU layer through cuDNN 9's RNN API (KernelTable::gru_layer, gru_layer_backward; the
// contract is tensor/ops.h's GruLayerForward). Per call:
//   forward:  Tern's parameters packed into cuDNN's weight space (one kernel; the space lives in
//             the step's arena, so the parameter buffer and its names stay Tern's), each column's
//             length from the mask (one kernel), cudnnRNNForward over the padded sequence-major
//             data, then the left-to-right final state copied over each column's padded positions
//             (and, for bf16/fp16, the output converted to float32) in one kernel.
//   backward: the padded positions' gradient summed into the final state's (dhy) and zeroed, and
//             dout converted for bf16/fp16 (one kernel), cudnnRNNBackwardData_v8,
//             cudnnRNNBackwardWeights_v8 into a zeroed gradient space, then that space unpacked
//             and added into Tern's gradients (one kernel) and dx converted or added (one kernel).
// The settings: CUDNN_GRU with CUDNN_RNN_DOUBLE_BIAS (the recurrent biases packed as zeros, which
// makes cuDNN's formula Tern's: tensor/gru_weight_layout.h), one layer, uni- or bidirectional,
// CUDNN_LINEAR_INPUT, CUDNN_RNN_ALGO_STANDARD, no dropout, CUDNN_RNN_PADDED_IO_ENABLED with
// CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED data and a zero padding fill. Data type and math:
// float32 with CUDNN_FMA_MATH (no TF32, as Tern's cuBLAS calls); fp16 with CUDNN_TENSOR_OP_MATH and
// bf16 with CUDNN_DEFAULT_MATH, both computing in float (mathPrec CUDNN_DATA_FLOAT), as PyTorch
// sets them for its half types.
//
// Not verified here (written where no GPU could run it; tests/tensor/cudnn_gru_test.cc and the
// device run's `cudnn` part check each on a GPU):
//   - that cuDNN starts the right-to-left direction of a short column at its last valid position
//     and leaves each column's final state in hy (its documented handling of seqLengthArray, which
//     PyTorch's packed sequences rely on), and ignores dy at padded positions (they are zeroed
//     anyway);
//   - that cudnnGetRNNWeightParams' matrices are row-major (hidden, input), as PyTorch's weight
//     copies assume: checked against the descriptor's strides where the shape tells them apart;
//   - the precision cuDNN carries a bf16/fp16 layer's state in between steps.
#include "tensor/cuda/cudnn_gru.h"

#include <cudnn.h>
#include <glog/logging.h>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "common/error.h"
#include "tensor/arena.h"
#include "tensor/cuda/cuda_common.h"
#include "tensor/cuda/cuda_kernels.h"
#include "tensor/gru_weight_layout.h"

namespace tern::cuda {
namespace {

[[noreturn]] void FailCudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  char detail[512] = "";
  cudnnGetLastErrorString(detail, sizeof(detail));
  Fail("cuDNN error at ", file, ":", line, ": ", call, ": ", cudnnGetErrorString(status),
       detail[0] != '\0' ? StrCat(" (", detail, ")") : std::string());
}

#define TERN_CUDNN_CHECK(call)                                                \
  do {                                                                        \
    cudnnStatus_t tern_cudnn_status_ = (call);                                \
    if (tern_cudnn_status_ != CUDNN_STATUS_SUCCESS)                           \
      ::tern::cuda::FailCudnn(tern_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

// This thread's handle, bound to its current stream.
cudnnHandle_t Handle() {
  thread_local cudnnHandle_t handle = nullptr;
  if (handle == nullptr) TERN_CUDNN_CHECK(cudnnCreate(&handle));
  TERN_CUDNN_CHECK(cudnnSetStream(handle, CurrentStream()));
  return handle;
}

cudnnDataType_t DataType(DType type) {
  switch (type) {
    case DType::kFloat32:
      return CUDNN_DATA_FLOAT;
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    default:
      Fail("cuDNN GRU layer: no data type ", DTypeName(type));
  }
}

cudnnMathType_t MathType(DType type) {
  switch (type) {
    case DType::kFloat32:
      return CUDNN_FMA_MATH;
    case DType::kFloat16:
      return CUDNN_TENSOR_OP_MATH;
    default:
      return CUDNN_DEFAULT_MATH;
  }
}

// A layer's RNN descriptor and where its weight space puts each block: one per (in, d,
// directions, type), made at first use on this thread.
struct Plan {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnDropoutDescriptor_t dropout = nullptr;
  size_t weight_bytes = 0;
  GruWeightLayout layout;
  std::vector<GruPackSegment> segments;
};

// The offset in elements of `address` from `base`, which it must be a whole element past.
int64_t OffsetOf(const void* address, const void* base, size_t element) {
  const auto bytes = static_cast<const char*>(address) - static_cast<const char*>(base);
  CHECK(bytes >= 0 && bytes % static_cast<int64_t>(element) == 0)
      << "cudnnGetRNNWeightParams: a block " << bytes << " bytes into the space";
  return bytes / static_cast<int64_t>(element);
}

// Checks that a block cudnnGetRNNWeightParams describes has rows * cols elements and, where its
// extents tell rows from cols, is (rows, cols) row-major: element [j][k] at j * cols + k.
void CheckMatrix(cudnnTensorDescriptor_t desc, int64_t rows, int64_t cols, const char* what) {
  cudnnDataType_t type;
  int dims = 0, dim[8], stride[8];
  TERN_CUDNN_CHECK(cudnnGetTensorNdDescriptor(desc, 8, &type, &dims, dim, stride));
  int64_t n = 1;
  std::vector<std::pair<int, int>> extents;  // (extent, stride) of the dims above 1, outer first
  for (int i = 0; i < dims; ++i) {
    n *= dim[i];
    if (dim[i] > 1) extents.emplace_back(dim[i], stride[i]);
  }
  CHECK_EQ(n, rows * cols) << "cuDNN's " << what << " has " << n << " elements, not " << rows
                           << " x " << cols;
  if (extents.size() == 2 && rows != cols) {
    CHECK(extents[0] == std::make_pair(static_cast<int>(rows), static_cast<int>(cols)) &&
          extents[1] == std::make_pair(static_cast<int>(cols), 1))
        << "cuDNN's " << what << " is not (" << rows << ", " << cols << ") row-major";
  }
}

Plan MakePlan(cudnnHandle_t handle, int64_t in, int64_t d, int dirs, DType type) {
  Plan p;
  TERN_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&p.dropout));
  TERN_CUDNN_CHECK(cudnnSetDropoutDescriptor(p.dropout, handle, 0.f, nullptr, 0, 0));
  TERN_CUDNN_CHECK(cudnnCreateRNNDescriptor(&p.rnn));
  TERN_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
      p.rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_GRU, CUDNN_RNN_DOUBLE_BIAS,
      dirs == 2 ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, DataType(type),
      CUDNN_DATA_FLOAT, MathType(type), static_cast<int32_t>(in), static_cast<int32_t>(d),
      static_cast<int32_t>(d), /*numLayers=*/1, p.dropout, CUDNN_RNN_PADDED_IO_ENABLED));
  TERN_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, p.rnn, &p.weight_bytes));
  // Where each block is: asked against a real buffer of the space's size.
  const size_t element = SizeOf(type);
  Tensor space = Tensor::Empty({static_cast<int64_t>(p.weight_bytes)}, DType::kInt8, Device::kCuda);
  cudnnTensorDescriptor_t m, b;
  TERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&m));
  TERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
  p.layout.in = in;
  p.layout.d = d;
  p.layout.directions = dirs;
  p.layout.size = static_cast<int64_t>(p.weight_bytes / element);
  for (int dir = 0; dir < dirs; ++dir) {
    for (int id = 0; id < 6; ++id) {
      void* m_at = nullptr;
      void* b_at = nullptr;
      TERN_CUDNN_CHECK(cudnnGetRNNWeightParams(handle, p.rnn, dir, p.weight_bytes, space.raw(), id,
                                               m, &m_at, b, &b_at));
      CHECK(m_at != nullptr && b_at != nullptr)
          << "cuDNN's GRU has no matrix or bias " << id << " (direction " << dir << ")";
      CheckMatrix(m, d, id < 3 ? in : d, "GRU matrix");
      CheckMatrix(b, d, 1, "GRU bias");
      p.layout.matrix[dir][id] = OffsetOf(m_at, space.raw(), element);
      p.layout.bias[dir][id] = OffsetOf(b_at, space.raw(), element);
    }
  }
  TERN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(m));
  TERN_CUDNN_CHECK(cudnnDestroyTensorDescriptor(b));
  p.segments = GruPackSegments(p.layout);
  for (const GruPackSegment& s : p.segments)
    CHECK(s.offset >= 0 && s.offset + s.rows * s.cols <= p.layout.size)
        << "cuDNN's GRU weight space: a block outside it";
  return p;
}

const Plan& PlanFor(cudnnHandle_t handle, int64_t in, int64_t d, int dirs, DType type) {
  thread_local std::map<std::tuple<int64_t, int64_t, int, DType>, std::unique_ptr<Plan>> plans;
  std::unique_ptr<Plan>& plan = plans[{in, d, dirs, type}];
  if (plan == nullptr) plan = std::make_unique<Plan>(MakePlan(handle, in, d, dirs, type));
  return *plan;
}

// The segments with their tensors, for the pack (sources) or unpack (gradients) kernel.
GruSegmentList SegmentList(const Plan& plan, const GruWeights* weights, bool grads) {
  GruSegmentList list{};
  CHECK_LE(plan.segments.size(), static_cast<size_t>(kMaxGruSegments));
  for (const GruPackSegment& s : plan.segments) {
    GruSegmentArgs a{nullptr, nullptr, s.column, s.source_cols, s.rows, s.cols, s.offset};
    if (s.source != kGruZero) {
      const GruWeights& w = weights[s.direction];
      const Tensor* t[kGruZero] = {&w.w, &w.wx, &w.u, &w.ux, &w.b, &w.bx};
      const Tensor& tensor = *t[s.source];
      if (tensor.defined() && grads) a.grad = tensor.f32();
      if (tensor.defined() && !grads) a.source = tensor.f32();
    }
    list.segment[list.count++] = a;
    list.max_rows = std::max(list.max_rows, s.rows);
    list.max_cols = std::max(list.max_cols, s.cols);
  }
  return list;
}

// The descriptors of one call's data: x, y (sequence-major, padded, each column's length) and the
// states (directions, batch, d).
struct Data {
  int64_t len, batch, in, d;
  int dirs;
  DType type;
  bool padded = false;
  std::vector<int32_t> lengths;
  cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  cudnnTensorDescriptor_t h = nullptr;
  size_t work_bytes = 0, reserve_bytes = 0;
};

Data Describe(cudnnHandle_t handle, const Plan& plan, const GruLayerCall& c) {
  thread_local cudnnRNNDataDescriptor_t x = nullptr, y = nullptr;
  thread_local cudnnTensorDescriptor_t h = nullptr;
  if (x == nullptr) {
    TERN_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&x));
    TERN_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&y));
    TERN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&h));
  }
  Data data;
  data.len = c.x.dim(0);
  data.batch = c.x.dim(1);
  data.in = c.x.dim(2);
  data.d = plan.layout.d;
  data.dirs = c.directions;
  data.type = c.inputs;
  data.lengths.assign(data.batch, static_cast<int32_t>(data.len));
  if (c.lengths.defined()) {
    std::copy(c.lengths.i32(), c.lengths.i32() + data.batch, data.lengths.begin());
    for (int32_t n : data.lengths) data.padded |= n < data.len;
  }
  const cudnnDataType_t type = DataType(c.inputs);
  const double zero = 0;  // the padding fill: zero bits read as any of the data types
  const auto len = static_cast<int>(data.len), batch = static_cast<int>(data.batch);
  TERN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(x, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, len,
                                             batch, static_cast<int>(data.in), data.lengths.data(),
                                             const_cast<double*>(&zero)));
  TERN_CUDNN_CHECK(cudnnSetRNNDataDescriptor(y, type, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, len,
                                             batch, static_cast<int>(data.dirs * data.d),
                                             data.lengths.data(), const_cast<double*>(&zero)));
  const int dims[3] = {data.dirs, batch, static_cast<int>(data.d)};
  const int strides[3] = {static_cast<int>(data.batch * data.d), static_cast<int>(data.d), 1};
  TERN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(h, type, 3, dims, strides));
  data.x = x;
  data.y = y;
  data.h = h;
  TERN_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(
      handle, plan.rnn, c.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, x,
      &data.work_bytes, &data.reserve_bytes));
  return data;
}

// What the forward pass keeps for the backward one, in one arena block: byte offsets of each part
// (256-byte aligned), kNone where a call has no such part.
constexpr size_t kNone = ~size_t{0};
struct Saved {
  size_t weights = kNone, reserve = kNone, lengths = kNone, y = kNone, hy = kNone, x = kNone;
  size_t bytes = 0;
  // cuDNN's output apart from `out`: for bf16/fp16, or float32 with padding (out is then changed).
  bool separate_y = false;
};

Saved SavedParts(const Plan& plan, const Data& data, const Tensor& x) {
  Saved s;
  auto part = [&](size_t bytes) {
    const size_t at = s.bytes;
    s.bytes += (bytes + 255) / 256 * 256;
    return at;
  };
  const size_t element = SizeOf(data.type);
  s.weights = part(plan.weight_bytes);
  if (data.reserve_bytes > 0) s.reserve = part(data.reserve_bytes);
  s.lengths = part(data.batch * sizeof(int32_t));
  s.separate_y = data.type != DType::kFloat32 || data.padded;
  if (s.separate_y) s.y = part(data.len * data.batch * data.dirs * data.d * element);
  if (data.padded) s.hy = part(data.dirs * data.batch * data.d * element);
  if (x.dtype() != data.type) s.x = part(x.numel() * element);
  return s;
}

char* At(const Tensor& block, size_t offset) {
  return offset == kNone ? nullptr : static_cast<char*>(block.raw()) + offset;
}

// `bytes` from the arena at a 256-byte boundary (the arena's blocks are 64-byte aligned): the
// block to give back, and the aligned view cuDNN is handed.
struct Buffer {
  Tensor block, view;
};
Buffer AlignedBuffer(Arena& arena, size_t bytes) {
  Buffer b;
  b.block = arena.Alloc({static_cast<int64_t>(bytes + 256)}, DType::kInt8);
  const auto skew = reinterpret_cast<uintptr_t>(b.block.raw()) % 256;
  b.view = Tensor(static_cast<char*>(b.block.raw()) + (skew == 0 ? 0 : 256 - skew),
                  {static_cast<int64_t>(bytes)}, DType::kInt8, Device::kCuda);
  return b;
}

void Forward(GruLayerCall& c) {
  cudnnHandle_t handle = Handle();
  const int64_t in = c.x.dim(2), d = c.weights[0].ux.dim(0);
  const Plan& plan = PlanFor(handle, in, d, c.directions, c.inputs);
  const Data data = Describe(handle, plan, c);
  const Saved parts = SavedParts(plan, data, c.x);
  const Buffer block = AlignedBuffer(*c.arena, parts.bytes);
  const Tensor& aligned = block.view;
  PackGruWeightSpace(SegmentList(plan, c.weights, false), data.type, At(aligned, parts.weights));
  auto* lengths = reinterpret_cast<int32_t*>(At(aligned, parts.lengths));
  GruSequenceLengths(c.mask.defined() ? c.mask.f32() : nullptr, data.len, data.batch, lengths);
  const void* x = c.x.raw();
  if (parts.x != kNone) {
    Tensor rounded(At(aligned, parts.x), c.x.shape(), data.type, Device::kCuda);
    ConvertFloat(c.x, rounded);
    x = rounded.raw();
  }
  void* y = parts.separate_y ? At(aligned, parts.y) : c.out.raw();
  const Buffer work = AlignedBuffer(*c.arena, data.work_bytes);
  TERN_CUDNN_CHECK(cudnnRNNForward(
      handle, plan.rnn, c.training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, lengths,
      data.x, x, data.y, y, data.h, nullptr, At(aligned, parts.hy), data.h, nullptr, nullptr,
      plan.weight_bytes, At(aligned, parts.weights), data.work_bytes, work.view.raw(),
      c.training ? data.reserve_bytes : 0, At(aligned, parts.reserve)));
  c.arena->Release(work.block);
  if (parts.separate_y) {
    FinishGruOutput(data.type, y, At(aligned, parts.hy), lengths, data.len, data.batch, data.d,
                    data.dirs, c.out.f32());
  }
  if (c.training) {
    c.saved = aligned;
  } else {
    c.arena->Release(block.block);
    c.saved = Tensor();
  }
}

void Backward(const GruLayerCall& c, const GruLayerGrads& g) {
  cudnnHandle_t handle = Handle();
  const int64_t in = c.x.dim(2), d = c.weights[0].ux.dim(0);
  const Plan& plan = PlanFor(handle, in, d, c.directions, c.inputs);
  const Data data = Describe(handle, plan, c);
  const Saved parts = SavedParts(plan, data, c.x);
  CHECK(c.saved.defined() && c.saved.numel() == static_cast<int64_t>(parts.bytes))
      << "cuDNN GRU backward: the forward pass kept " << c.saved.numel() << " bytes, not "
      << parts.bytes;
  const Tensor& saved = c.saved;
  const auto* lengths = reinterpret_cast<const int32_t*>(At(saved, parts.lengths));
  const size_t element = SizeOf(data.type);
  const int64_t out_n = data.len * data.batch * data.dirs * data.d;
  Arena& arena = *c.arena;
  // dy and dhy: the padded positions' gradient onto the final state.
  Buffer dy_buffer, dhy_buffer;
  void* dy = g.dout.raw();
  if (data.type != DType::kFloat32) {
    dy_buffer = AlignedBuffer(arena, out_n * element);
    dy = dy_buffer.view.raw();
  }
  void* dhy = nullptr;
  if (data.padded) {
    dhy_buffer = AlignedBuffer(arena, data.dirs * data.batch * data.d * element);
    dhy = dhy_buffer.view.raw();
  }
  if (data.type != DType::kFloat32 || data.padded) {
    PrepareGruOutputGrad(data.type, g.dout.f32(), lengths, data.len, data.batch, data.d, data.dirs,
                         data.type != DType::kFloat32 ? dy : nullptr, dhy);
  }
  // dx: straight into the gradient where cuDNN's type and write fit it, else through a buffer.
  const bool direct_dx = g.dx.defined() && !g.dx_accumulate && data.type == DType::kFloat32;
  Buffer dx_buffer;
  void* dx = direct_dx ? g.dx.raw() : nullptr;
  if (!direct_dx) {
    dx_buffer = AlignedBuffer(arena, c.x.numel() * element);
    dx = dx_buffer.view.raw();
  }
  const void* y = parts.separate_y ? At(saved, parts.y) : c.out.raw();
  const void* x = parts.x != kNone ? At(saved, parts.x) : c.x.raw();
  const Buffer work = AlignedBuffer(arena, data.work_bytes);
  TERN_CUDNN_CHECK(cudnnRNNBackwardData_v8(
      handle, plan.rnn, lengths, data.y, y, dy, data.x, dx, data.h, nullptr, dhy, nullptr, data.h,
      nullptr, nullptr, nullptr, plan.weight_bytes, At(saved, parts.weights), data.work_bytes,
      work.view.raw(), data.reserve_bytes, At(saved, parts.reserve)));
  if (g.dx.defined() && !direct_dx)
    AddGruInputGrad(data.type, dx, c.x.numel(), g.dx_accumulate, g.dx.f32());
  const Buffer dweights = AlignedBuffer(arena, plan.weight_bytes);
  ZeroBytes(dweights.view.raw(), Device::kCuda, plan.weight_bytes);
  TERN_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
      handle, plan.rnn, CUDNN_WGRAD_MODE_ADD, lengths, data.x, x, data.h, nullptr, data.y, y,
      plan.weight_bytes, dweights.view.raw(), data.work_bytes, work.view.raw(), data.reserve_bytes,
      At(saved, parts.reserve)));
  UnpackGruWeightSpace(SegmentList(plan, g.dweights, true), data.type, dweights.view.raw());
  for (const Buffer* b :
       std::initializer_list<const Buffer*>{&dweights, &work, &dx_buffer, &dhy_buffer, &dy_buffer})
    if (b->block.defined()) arena.Release(b->block);
}

}  // namespace

GruLayerFn CudnnGruLayer() {
  // The RNN calls used here are cuDNN 9's; an older library loaded at run time has not all of
  // them.
  if (cudnnGetVersion() < 90000) {
    LOG(WARNING) << "cuDNN " << cudnnGetVersion()
                 << " is older than 9: GRU layers run Tern's step kernels";
    return nullptr;
  }
  return &Forward;
}

GruLayerBackwardFn CudnnGruLayerBackward() {
  return cudnnGetVersion() < 90000 ? nullptr : &Backward;
}

}  // namespace tern::cuda
