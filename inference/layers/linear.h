// Linear layers of the runtime, y = x W + b, over float32 or integer weights (Devlin 2017;
// Marian), with Marian's auto-tuner (WNMT 2018, sec. 4.4) choosing between the two per shape when
// a layer has both.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "inference/format/weights.h"
#include "tensor/arena.h"
#include "tensor/cpu/float_gemm.h"
#include "tensor/cpu/int_gemm.h"
#include "tensor/kernel_table.h"
#include "tensor/tensor.h"

namespace tern::inference {

// How the runtime builds its linear layers from the model's weights.
struct LinearOptions {
  // Quantize float32 weight matrices at load to this type (unset: run them as float).
  std::optional<cpu::IntType> quantize;
  // Keep both a float and an integer form of each layer and time both per row count over the
  // first calls, keeping the faster (results then depend on timings, so off by default).
  bool autotune = false;
  // Whether an integer model also runs its output layer (E^T, the widest product) as integers
  // (a speed-up of its own: on the bible teacher int16 there keeps 312 of 320 test translations
  // identical to float32 against 317 with it in float32).
  bool integer_output_layer = false;
  // Whether the integer product after a ReLU (a feed-forward block's second) skips the k-groups
  // the ReLU left zero in every row of a 4-row tile (a beam's hypotheses are alike): the same
  // results, less work (cpu::IntGemm's skip_zero_groups).
  bool skip_zero_activations = false;
  // The float products' inputs: kBFloat16 or kFloat16 round both operands to that type and
  // accumulate in float32 (tensor cores on a GPU; emulated on the CPU, a check only).
  DType inputs = DType::kFloat32;
};

// Times the float and integer products of one layer per row count and settles on the faster.
// Shared by the Translators of one model: thread-safe.
class ProductTuner {
 public:
  // Calls of each product timed before choosing (the first of each is a warm-up and not counted).
  static constexpr int kTrials = 4;

  // Whether the next product of `rows` rows should run the integer kernel.
  bool UseInteger(int64_t rows);
  void Record(int64_t rows, bool integer, double seconds);
  // The settled choice for `rows` (unset while still timing).
  std::optional<bool> Choice(int64_t rows) const;

 private:
  struct Stats {
    int calls[2] = {0, 0};
    double seconds[2] = {0, 0};
    std::optional<bool> integer;
  };
  static int64_t Bucket(int64_t rows);
  mutable std::mutex mu_;
  std::map<int64_t, Stats> stats_;  // GUARDED_BY(mu_), by Bucket(rows)
};

// A linear layer's weight matrix W (in, out): float32, packed integer, or both. The product runs
// the tuner's choice when there is a tuner, else the integer form when there is one.
struct LinearWeights {
  // (in, out) float32, or (out, in) when transposed; or undefined. On a GPU with bf16 or fp16
  // `inputs`, already of that type (rounded once at load, not in every product).
  Tensor w;
  bool transposed = false;  // w holds W^T (the output layer's embedding (V, d))
  std::shared_ptr<const cpu::PackedIntMatrix> packed;  // W (in, out) as integers, or null
  // W packed for cpu::FloatGemm: a CPU's float32 product when the CPU has a kernel (else the
  // BLAS multiplies w), or null.
  std::shared_ptr<const cpu::PackedFloatMatrix> packed_float;
  std::shared_ptr<ProductTuner> tuner;  // when both forms are kept to be tuned
  DType inputs = DType::kFloat32;       // the float product's (LinearOptions)
  bool skip_zero_inputs = false;  // the integer product skips x's zero groups (the input of ReLU)

  int64_t in() const { return packed ? packed->k() : w.dim(transposed ? 1 : 0); }
  int64_t out() const { return packed ? packed->n() : w.dim(transposed ? 0 : 1); }
};

// Builds a layer from a model file's tensor (in, out): float32, or int16/int8 with `scale` and
// maybe column_scales (out) (value = q / (scale * column_scales[j]); Weights::ColumnScales).
// Float weights stay views (the storage must outlive the layer), but for a GPU's bf16 or fp16
// products, which get their own rounded copy; the forms `options` ask for are
// made here and owned by the result: on the CPU a float product's weights are also packed once
// for cpu::FloatGemm (PackFloatWeights).
LinearWeights MakeLinearWeights(const Tensor& w, float scale, const LinearOptions& options,
                                const Tensor& column_scales = Tensor());
// The output layer's weight from the (V, d) embedding: W = E^T (d, V). The float form is a view of
// E (transposed), or on a GPU with bf16 or fp16 `inputs` a rounded copy; an integer form is made
// when `type` is set.
LinearWeights MakeOutputWeights(const Tensor& embedding, std::optional<cpu::IntType> type,
                                bool autotune, DType inputs = DType::kFloat32);

// W (in, out), or (out, in) when transposed, packed for cpu::FloatGemm when it should run this
// layer's float products (a float32 matrix on the CPU with float32 inputs, and a CPU with a
// kernel); else null.
std::shared_ptr<const cpu::PackedFloatMatrix> PackFloatWeights(const Tensor& w, bool transposed,
                                                               DType inputs);

// The integer type an output layer runs in when LinearOptions::integer_output_layer asks for it:
// LinearOptions::quantize, else the type of the model's integer weights; none for a float model.
std::optional<cpu::IntType> OutputLayerType(const Weights& weights, const LinearOptions& linear);

// y (rows, out) = x (rows, in) @ W + b (out). x may have any rank; y keeps its leading dims.
// LinearInto writes into a given y. The float form of an output layer is used as E^T.
// With `residual` (y's shape) y = residual + (x @ W + b): a sublayer and its residual
// connection, in the product's own pass where it is a float product with a bias (GemmBias).
// With `activation` (kRelu or kGelu, not with a residual) y = f(x @ W + b), likewise in the
// product's pass where GemmBias can (swish has no such pass: FeedForward applies it after).
Tensor Linear(const Tensor& x, const LinearWeights& w, const Tensor& b, Arena& arena,
              const Tensor& residual = Tensor(), int activation = kNoActivation);
void LinearInto(const Tensor& x, const LinearWeights& w, const Tensor& b, const Tensor& y,
                const Tensor& residual = Tensor(), int activation = kNoActivation);
// The same over a plain float32 weight w (in, out), for layers that have no integer form.
Tensor Linear(const Tensor& x, const Tensor& w, const Tensor& b, Arena& arena);
void LinearInto(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y);

}  // namespace tern::inference
