// training.precision "auto" (the default): the matrix products' operand type a run takes,
// chosen at start-up. bf16 products on a CPU whose AVX512-BF16 kernel beats float32 on this
// model's shape; float32 everywhere else: a CPU without the kernel would emulate bf16 more slowly
// than float32, and some CPUs with it run float32 faster through their BLAS (docs/training.md).
#pragma once

#include <cstdint>
#include <string>

#include "configs/tern.pb.h"
#include "tensor/tensor.h"

namespace tern::trainer {

struct PrecisionChoice {
  std::string precision;  // "float32" or "bf16"
  std::string why;        // for the log: what decided it
};

// One product of the model's typical shape, (m, k) x (k, n), and how long it took with each
// operand type (seconds, the fastest of a few tries; 0 when not timed).
struct ProductTimes {
  int64_t m = 0, k = 0, n = 0;
  double float32_seconds = 0.;
  double bf16_seconds = 0.;
  std::string kernel = "AVX512-BF16";  // the CPU's bf16 kernel, named in the reason
};

// What computes a run's matrix products, for its metrics' start record: "float32"; a 16-bit type
// and where it runs: "bf16 AMX-BF16", "bf16 AVX512-BF16" (the CPU kernels, whose sums round
// differently), "fp16 emulated" (float32 products of rounded operands), "bf16 GPU".
std::string ProductsName(const std::string& precision, Device device);

// bf16 must beat float32 by this factor on the product alone: a step also rounds each operand
// once, and the choice must not flip on noise.
inline constexpr double kBf16MinSpeedup = 1.1;
// Products of fewer multiply-adds (m k n) are not timed and stay float32: they last well under a
// millisecond, too short to time against each other reliably, and a model that small has little
// to gain. The demo's, 2,000 x 256 x 1,024, is 4 times this.
inline constexpr int64_t kMinTimedProduct = int64_t{1} << 27;

// The product auto times: m the batch's target tokens (at most 4,096), k the model width and n
// its feed-forward width (4 k where it has none).
ProductTimes ProductShape(const config::TrainConfig& config);

// The decision, given what the run is and what was measured. `times`' seconds are read only when
// `device` is the CPU, the run has no virtual workers, `native_bf16` holds and the product is
// not below kMinTimedProduct.
PrecisionChoice ChoosePrecision(Device device, bool virtual_workers, bool native_bf16,
                                const ProductTimes& times);

// `shape` with its seconds filled in, timed on this process's compute threads, the two types
// taking turns. REQUIRES: the CPU has the bf16 kernel.
ProductTimes TimeProducts(ProductTimes shape);

// "auto" resolved for this machine: ChoosePrecision, timing the products where it needs them.
PrecisionChoice ResolveAutoPrecision(const config::TrainConfig& config, Device device);

}  // namespace tern::trainer
