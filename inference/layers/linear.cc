#include "inference/layers/linear.h"

#include <chrono>

#include "common/error.h"
#include "tensor/ops.h"

namespace tern::inference {

int64_t ProductTuner::Bucket(int64_t rows) {
  int64_t b = 1;
  while (b < rows) b *= 2;
  return b;
}

bool ProductTuner::UseInteger(int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  Stats& s = stats_[Bucket(rows)];
  if (s.integer) return *s.integer;
  return s.calls[1] <= s.calls[0];  // alternate, integer first
}

void ProductTuner::Record(int64_t rows, bool integer, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  Stats& s = stats_[Bucket(rows)];
  if (s.integer) return;
  const int i = integer ? 1 : 0;
  if (s.calls[i]++ > 0) s.seconds[i] += seconds;  // the first call warms caches
  if (s.calls[0] > kTrials && s.calls[1] > kTrials) s.integer = s.seconds[1] <= s.seconds[0];
}

std::optional<bool> ProductTuner::Choice(int64_t rows) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = stats_.find(Bucket(rows));
  return it == stats_.end() ? std::nullopt : it->second.integer;
}

namespace {

// A GPU's float weight matrix for products with bf16 or fp16 inputs: rounded once here, so that
// no product converts it again (a launch, and a pass over twice its bytes, per product per step).
// The bits each product would have rounded it to (RoundOperand's rounding is the products').
Tensor ProductOperand(const Tensor& w, DType inputs) {
  if (w.device() == Device::kCpu || inputs == DType::kFloat32 || w.dtype() != DType::kFloat32) {
    return w;
  }
  Tensor rounded = Tensor::Empty(w.shape(), inputs, w.device());
  RoundOperand(w, rounded);
  return rounded;
}

}  // namespace

std::shared_ptr<const cpu::PackedFloatMatrix> PackFloatWeights(const Tensor& w, bool transposed,
                                                               DType inputs) {
  if (!w.defined() || w.device() != Device::kCpu || w.dtype() != DType::kFloat32 ||
      inputs != DType::kFloat32 || !cpu::HasFloatGemmKernel()) {
    return nullptr;
  }
  const int64_t k = w.dim(transposed ? 1 : 0), n = w.dim(transposed ? 0 : 1);
  return std::make_shared<const cpu::PackedFloatMatrix>(w.f32(), k, n, transposed);
}

LinearWeights MakeLinearWeights(const Tensor& w, float scale, const LinearOptions& options,
                                const Tensor& column_scales) {
  CHECK(w.rank() == 2 && (w.device() == Device::kCpu ||
                          (w.dtype() == DType::kFloat32 && !options.quantize && !options.autotune)))
      << "integer weight matrices are read on the CPU";
  const int64_t in = w.dim(0), out = w.dim(1);
  LinearWeights l;
  l.inputs = options.inputs;
  if (w.dtype() == DType::kFloat32) {
    l.w = ProductOperand(w, options.inputs);
    if (options.quantize) {
      l.packed = cpu::PackedIntMatrix::FromFloat(*options.quantize, w.f32(), in, out, false);
    }
  } else {
    const cpu::IntType type =
        w.dtype() == DType::kInt16 ? cpu::IntType::kInt16 : cpu::IntType::kInt8;
    l.packed = std::make_shared<cpu::PackedIntMatrix>(
        type, w.raw(), in, out, scale, false,
        column_scales.defined() ? column_scales.f32() : nullptr);
    if (options.autotune) {  // a float form to race against: the dequantized values
      l.w = Dequantize(w, scale, column_scales);
    }
  }
  if (options.autotune && l.packed) l.tuner = std::make_shared<ProductTuner>();
  // The float form runs when there is no integer one, or races it.
  if (!l.packed || l.tuner) l.packed_float = PackFloatWeights(l.w, false, l.inputs);
  return l;
}

LinearWeights MakeOutputWeights(const Tensor& embedding, std::optional<cpu::IntType> type,
                                bool autotune, DType inputs) {
  LinearWeights l;
  l.w = ProductOperand(embedding, inputs);
  l.transposed = true;
  l.inputs = inputs;
  if (type) {
    l.packed = cpu::PackedIntMatrix::FromFloat(*type, embedding.f32(), embedding.dim(1),
                                               embedding.dim(0), /*transposed=*/true);
    if (autotune) l.tuner = std::make_shared<ProductTuner>();
  }
  if (!l.packed || l.tuner) l.packed_float = PackFloatWeights(l.w, true, inputs);
  return l;
}

std::optional<cpu::IntType> OutputLayerType(const Weights& weights, const LinearOptions& linear) {
  if (!linear.integer_output_layer) return std::nullopt;
  if (linear.quantize) return linear.quantize;
  for (const std::string& name : weights.Names()) {
    const DType dt = weights.Get(name).dtype();
    if (dt == DType::kInt16) return cpu::IntType::kInt16;
    if (dt == DType::kInt8) return cpu::IntType::kInt8;
  }
  return std::nullopt;
}

void LinearInto(const Tensor& x, const LinearWeights& w, const Tensor& b, const Tensor& y,
                const Tensor& residual, int activation) {
  Tensor x2 = x.Flatten2D();
  const int64_t rows = x2.rows();
  Tensor y2 = y.Reshape({rows, w.out()});
  const Tensor residual2 = residual.defined() ? residual.Reshape(y2.shape()) : residual;
  bool residual_added = false, activated = false;
  const bool integer = w.packed && (!w.tuner || w.tuner->UseInteger(rows));
  const auto start = std::chrono::steady_clock::now();
  if (integer) {
    CHECK(x2.device() == Device::kCpu && x2.dtype() == DType::kFloat32 && x2.cols() == w.in())
        << "integer linear layer: x must be float32 (rows, " << w.in() << ") on the CPU";
    cpu::IntGemm(x2.f32(), rows, *w.packed, b.defined() ? b.f32() : nullptr, y2.f32(), w.out(),
                 w.skip_zero_inputs);
  } else if (w.packed_float) {
    CHECK(x2.device() == Device::kCpu && x2.dtype() == DType::kFloat32 && x2.cols() == w.in())
        << "packed float linear layer: x must be float32 (rows, " << w.in() << ") on the CPU";
    cpu::FloatEpilogue e;
    e.bias = b.defined() ? b.f32() : nullptr;
    if (residual2.defined()) {
      e.residual = residual2.f32();
      e.ldr = w.out();
    }
    e.relu = activation == kRelu;
    cpu::FloatGemm(x2.f32(), rows, w.in(), *w.packed_float, e, y2.f32(), w.out());
    residual_added = true;
    activated = activation == kRelu;
  } else {
    CHECK(w.w.defined()) << "linear layer without float weights";
    if (b.defined()) {
      GemmBias(x2, false, w.w, w.transposed, b, y2, w.inputs, residual2, activation);
      residual_added = activated = true;
    } else {
      Gemm(x2, false, w.w, w.transposed, y2, 1.f, 0.f, w.inputs);
    }
  }
  if (w.tuner) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    w.tuner->Record(rows, integer, seconds);
  }
  if (residual.defined() && !residual_added) Add(residual2, y2, y2);
  if (activation != kNoActivation && !activated) Unary(static_cast<UnaryOp>(activation), y2, y2);
}

Tensor Linear(const Tensor& x, const LinearWeights& w, const Tensor& b, Arena& arena,
              const Tensor& residual, int activation) {
  std::vector<int64_t> dims = x.shape().dims();
  dims.back() = w.out();
  Tensor y = arena.Alloc(Shape(dims));
  LinearInto(x, w, b, y, residual, activation);
  return y;
}

Tensor Linear(const Tensor& x, const Tensor& w, const Tensor& b, Arena& arena) {
  LinearWeights weights;
  weights.w = w;
  return Linear(x, weights, b, arena);
}

void LinearInto(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  LinearWeights weights;
  weights.w = w;
  LinearInto(x, weights, b, y);
}

}  // namespace tern::inference
