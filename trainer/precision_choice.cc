#include "trainer/precision_choice.h"

#include <algorithm>
#include <cstdio>

#include "common/timer.h"
#include "tensor/ops.h"

namespace tern::trainer {

namespace {

std::string Milliseconds(double seconds) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.1f ms", 1e3 * seconds);
  return s;
}

std::string ShapeText(const ProductTimes& t) {
  return std::to_string(t.m) + "x" + std::to_string(t.k) + "x" + std::to_string(t.n);
}

bool Timed(const ProductTimes& t) { return t.m * t.k * t.n >= kMinTimedProduct; }

// The fastest of `tries` products c = a b with `inputs` operands.
double FastestProduct(const Tensor& a, const Tensor& b, const Tensor& c, DType inputs, int tries) {
  double best = 1e30;
  for (int i = 0; i < tries; ++i) {
    Timer timer;
    Gemm(a, false, b, false, c, 1.f, 0.f, inputs);
    best = std::min(best, timer.Seconds());
  }
  return best;
}

}  // namespace

ProductTimes ProductShape(const config::TrainConfig& config) {
  const config::ModelConfig& model = config.model();
  ProductTimes t;
  t.m = std::clamp<int64_t>(config.data().batch_tokens(), 1, 4096);
  t.k = std::max(1, model.emb_dim());
  t.n = model.ffn_dim() > 0 ? model.ffn_dim() : 4 * t.k;
  return t;
}

PrecisionChoice ChoosePrecision(Device device, bool virtual_workers, bool native_bf16,
                                const ProductTimes& times) {
  if (device != Device::kCpu)
    return {"float32", "a GPU run keeps float32 unless training.precision names bf16 or fp16"};
  if (virtual_workers) return {"float32", "virtual workers run float32"};
  if (!native_bf16)
    return {"float32",
            "this CPU has no AVX512-BF16, so bf16 products would be emulated, slower than float32"};
  const std::string shape = ShapeText(times);
  if (!Timed(times))
    return {"float32", "the model's " + shape + " products are too small for bf16 to pay"};
  const std::string measured = "a " + shape + " product took " + Milliseconds(times.bf16_seconds) +
                               " with bf16 operands, " + Milliseconds(times.float32_seconds) +
                               " in float32";
  if (times.bf16_seconds * kBf16MinSpeedup <= times.float32_seconds)
    return {"bf16", times.kernel + " beats float32 on this model: " + measured};
  char margin[16];
  std::snprintf(margin, sizeof(margin), "%.1fx", kBf16MinSpeedup);
  return {"float32",
          times.kernel + " does not beat float32 by " + margin + " on this model: " + measured};
}

ProductTimes TimeProducts(ProductTimes t) {
  const Tensor a = Tensor::Empty({t.m, t.k});
  const Tensor b = Tensor::Empty({t.k, t.n});
  const Tensor c = Tensor::Empty({t.m, t.n});
  Fill(a, 0.5f);
  Fill(b, 0.25f);
  // One untimed product of each warms the caches and the threads; then they take turns, so a
  // neighbour's burst costs both alike.
  FastestProduct(a, b, c, DType::kFloat32, 1);
  FastestProduct(a, b, c, DType::kBFloat16, 1);
  t.float32_seconds = t.bf16_seconds = 1e30;
  for (int round = 0; round < 3; ++round) {
    t.float32_seconds = std::min(t.float32_seconds, FastestProduct(a, b, c, DType::kFloat32, 2));
    t.bf16_seconds = std::min(t.bf16_seconds, FastestProduct(a, b, c, DType::kBFloat16, 2));
  }
  return t;
}

std::string ProductsName(const std::string& precision, Device device) {
  if (precision != "bf16" && precision != "fp16") return "float32";
  if (device != Device::kCpu) return precision + " GPU";
  const DType type = precision == "bf16" ? DType::kBFloat16 : DType::kFloat16;
  return precision + " " + (NativeProductInputs(device, type) ? CpuBf16KernelName() : "emulated");
}

PrecisionChoice ResolveAutoPrecision(const config::TrainConfig& config, Device device) {
  const bool virtual_workers = config.distributed().virtual_workers() > 0;
  const bool native = device == Device::kCpu && !virtual_workers &&
                      NativeProductInputs(Device::kCpu, DType::kBFloat16);
  ProductTimes times = ProductShape(config);
  times.kernel = CpuBf16KernelName();
  if (native && Timed(times)) times = TimeProducts(times);
  return ChoosePrecision(device, virtual_workers, native, times);
}

}  // namespace tern::trainer
