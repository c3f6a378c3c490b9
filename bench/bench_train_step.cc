// bench-train-step: target tokens/s of one training step (forward, backward, Adam) for the
// transformer-base shape, the small demo preset and (--models s2s) the GRU preset, and the
// model-FLOPs utilization: the step's
// matrix-product FLOPs (counted by tensor/ as they run) over its time, divided by the BLAS's own
// float32 GEMM rate measured in the same run. One JSON line per model; host_waits_per_step
// counts the times a timed step made the host wait for the GPU (DeviceDrains; 0 is the aim).
//
// With --device cuda everything (parameters, batch, activations, Adam's state) lives on the GPU
// and the reference is cuBLAS's sgemm there.
//
// --precision bf16|fp16 runs the step's matrix products with those operands (mixed precision, as
// training.precision does: tensor cores on a GPU, an emulation on the CPU); the reference GEMM
// rate is then our Gemm at that precision, the operands' conversion included.
//
// --models gru,gru-wmt times one bidirectional GRU layer alone (the s2s encoder's, through
// models::RunBiGruLayer: on a GPU with cuDNN one whole-layer op, else x W for every step at once,
// then a step's recurrent products and the fused GruStep; forward and backward, then Adam; no
// layer normalization, mask or dropout), "tokens" being its input's positions:
// bench/train_step_torch.py times torch.nn.GRU (cuDNN's on a GPU) on the same shapes.
// --models s2s-cudnn is s2s without layer normalization and state dropout
// (configs/bible-s2s-cudnn.pbtxt's shape), whose encoder runs whole. TERN_GRU_LAYERS=steps keeps
// every layer on Tern's step kernels (the "before" of a comparison); the JSON line's "gru_layers"
// says which path the device took ("whole where eligible" or "steps").
//
//   bench-train-step [--models base,small] [--steps 3] [--windows 1] [--threads N] [--device
//   cpu|cuda]
//                    [--precision float32|bf16|fp16]
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/timer.h"
#include "graph/graph.h"
#include "graph/ops.h"
#include "models/model.h"
#include "models/rnn_layers.h"
#include "optim/optimizer.h"
#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "tensor/threads.h"

DEFINE_string(models, "small,base",
              "which shapes to time: small (demo preset), base, s2s (the GRU preset), s2s-cudnn "
              "(its variant without layer normalization and state dropout), gru and gru-wmt (one "
              "bidirectional GRU layer: bible-s2s's shape, and 512 -> 1024 at batch 80 x 50)");
DEFINE_int32(steps, 3, "timed steps per window (after two warm-up steps)");
DEFINE_int32(windows, 1,
             "timed windows of --steps steps; the median window is reported, every window's "
             "rate listed (a GPU's clocks, or a shared machine, vary from window to window)");
DEFINE_int32(threads, 0, "compute threads (0: all cores up to 8)");
DEFINE_string(device, "cpu", "where the step runs: cpu or cuda");
DEFINE_string(precision, "float32", "the matrix products' operands: float32, bf16 or fp16");
DEFINE_int32(batch, 0, "sentences per batch (0: the shape's own, 64)");
DEFINE_bool(gemm_rates, true,
            "measure the GEMM rates for the MFU columns (off: only the steps run, for a profiler)");

namespace tern {
namespace {

struct Shape3 {
  const char* name;
  int dim, ffn, heads, depth, vocab, batch, src_len, tgt_len;
  // "s2s", "s2s-cudnn": dim is emb_dim and rnn_dim, configs/bible-s2s's way (the second without
  // layer normalization and state dropout). "gru": one bidirectional GRU layer from dim inputs to
  // ffn states over src_len positions (heads, depth and vocab unused).
  const char* arch = "transformer";
};

// Waits for the device's queued work: a copy to the host waits for the stream.
void WaitFor(const Tensor& t) {
  float x;
  CopyBytes(&x, Device::kCpu, t.raw(), t.device(), sizeof(x));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

DType Precision() {
  if (FLAGS_precision == "bf16") return DType::kBFloat16;
  if (FLAGS_precision == "fp16") return DType::kFloat16;
  return DType::kFloat32;
}

// GFLOP/s of an m x k by k x n product on `device`, at --precision (float32 operands rounded by
// the product, as the step's are), the best of 5 rounds of `reps`.
double MeasureGemmGflops(Device device, int m, int k, int n, int reps) {
  const DType inputs = Precision();
  Tensor a = Tensor::Empty({m, k}, DType::kFloat32, device);
  Tensor b = Tensor::Empty({k, n}, DType::kFloat32, device);
  Tensor c = Tensor::Empty({m, n}, DType::kFloat32, device);
  Fill(a, 0.5f);
  Fill(b, 0.25f);
  Gemm(a, false, b, false, c, 1.f, 0.f, inputs);  // warm-up
  WaitFor(c);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    Timer t;
    for (int i = 0; i < reps; ++i) Gemm(a, false, b, false, c, 1.f, 0.f, inputs);
    WaitFor(c);
    best = std::max(best, reps * 2.0 * m * n * k / t.Seconds() / 1e9);
  }
  return best;
}

// The rate of a product shaped like the step's larger ones (2048 x 512 by 512 x 2048).
double TypicalGemmGflops(Device device) {
  return MeasureGemmGflops(device, 2048, 512, 2048, device == Device::kCpu ? 5 : 50);
}

// The device's own ceiling: a large square product (8192^3 on a GPU, 2048^3 on the CPU).
double PeakGemmGflops(Device device) {
  return device == Device::kCpu ? MeasureGemmGflops(device, 2048, 2048, 2048, 1)
                                : MeasureGemmGflops(device, 8192, 8192, 8192, 10);
}

// Random ids (and an all-ones mask) built on the host, copied into `arena` (on its device).
models::BatchTensors RandomBatch(const Shape3& s, Arena* arena, std::mt19937& rng) {
  std::uniform_int_distribution<int> id(4, s.vocab - 1);
  auto ids = [&](int64_t rows, int64_t cols) {
    std::vector<int32_t> host(rows * cols);
    for (int32_t& x : host) x = id(rng);
    Tensor t = arena->Alloc({rows, cols}, DType::kInt32);
    CopyBytes(t.raw(), t.device(), host.data(), Device::kCpu, t.bytes());
    return t;
  };
  models::BatchTensors b;
  b.src = ids(s.batch, s.src_len);
  b.src_mask = arena->Alloc({s.batch, s.src_len});
  Fill(b.src_mask, 1.f);
  b.tgt_in = ids(s.batch, s.tgt_len);
  b.tgt_out = ids(s.batch, s.tgt_len);
  b.src_lengths.assign(s.batch, s.src_len);
  return b;
}

// One training step of shape s on params (Finalized by the caller) with optimizer adam, its
// activations from arena, and the tokens it counts.
struct StepSetup {
  std::function<void(int)> step;
  int64_t tokens = 0;
};

// The whole model's step: forward, label-smoothed cross-entropy, backward.
StepSetup ModelStep(const Shape3& s, Device device, graph::ParamStore& params, Arena& arena,
                    Arena& batch_arena) {
  config::ModelConfig c;
  const std::string arch = s.arch;
  c.set_arch(arch == "s2s-cudnn" ? "s2s" : arch);
  c.set_emb_dim(s.dim);
  if (c.arch() == "s2s") {
    c.set_rnn_dim(s.dim);
    c.set_enc_cell_depth(1);
    c.set_dec_cell_base_depth(2);
    c.set_dec_cell_high_depth(1);
    c.set_layer_normalization(arch == "s2s");
    c.set_rnn_dropout(arch == "s2s" ? 0.1f : 0.f);
  }
  c.set_ffn_dim(s.ffn);
  c.set_heads(s.heads);
  c.set_enc_depth(s.depth);
  c.set_dec_depth(s.depth);
  c.set_tied_embeddings(true);
  c.set_dropout(0.1f);
  c.set_ffn_activation("relu");
  c.set_max_length(512);
  std::shared_ptr<models::Model> model = models::CreateModel(c, s.vocab);
  model->AddParams(&params);
  params.Finalize(device, 1);
  std::mt19937 rng(1);
  auto batch = std::make_shared<models::BatchTensors>(RandomBatch(s, &batch_arena, rng));
  const int64_t tokens = int64_t{s.batch} * s.tgt_len;
  return {[&params, &arena, model, batch, tokens](int i) {
            graph::Graph g(&arena, true, i);
            g.set_matmul_inputs(Precision());
            params.ZeroGrads();
            g.Backward(models::TokenLoss(g, model->Logits(g, params, *batch), batch->tgt_out, 0.1f),
                       1.f / tokens);
          },
          tokens};
}

// One bidirectional GRU layer's step: x (src_len, batch, dim), a parameter so that its gradient
// is computed as an encoder's embeddings' would be, through both directions; the loss is the
// sum of every state.
StepSetup GruLayerStep(const Shape3& s, Device device, graph::ParamStore& params, Arena& arena) {
  for (const char* p : {"fwd", "bwd"}) models::AddGruParams(&params, p, s.dim, s.ffn, false);
  params.Add("x", {s.src_len, s.batch, s.dim}, graph::Init::kNormal, 1.f);
  params.Finalize(device, 1);
  const int64_t tokens = int64_t{s.batch} * s.src_len;
  const int state = s.ffn;
  return {[&params, &arena, tokens, state](int i) {
            graph::Graph g(&arena, true, i);
            g.set_matmul_inputs(Precision());
            params.ZeroGrads();
            const models::RnnCtx ctx{g, params};
            const graph::Var both =
                models::RunBiGruLayer(ctx, {"fwd"}, {"bwd"}, ctx.P("x"), state, Tensor(), Tensor());
            g.Backward(graph::Sum(both), 1.f / tokens);
          },
          tokens};
}

// gemm_gflops: TypicalGemmGflops measured before; peak_gflops: PeakGemmGflops.
void Bench(Shape3 s, Device device, double gemm_gflops, double peak_gflops) {
  if (FLAGS_batch > 0) s.batch = FLAGS_batch;
  graph::ParamStore params;
  Arena batch_arena(device), arena(device);
  const StepSetup setup = std::string(s.arch) == "gru"
                              ? GruLayerStep(s, device, params, arena)
                              : ModelStep(s, device, params, arena, batch_arena);
  config::OptimConfig oc;
  oc.set_optimizer("adam");
  auto adam = optim::MakeOptimizer(oc, params.total_size());
  const int64_t tokens = setup.tokens;
  auto step = [&](int i) {
    setup.step(i);
    optim::StepOptions o;
    o.learning_rate = 1e-4f;
    adam->Step(params.values_flat(), params.grads_flat(), o);
    arena.Reset();
  };
  step(-1);  // the first two steps size the arena and touch its pages
  step(0);
  WaitFor(params.values_flat());
  std::vector<double> window_seconds;
  int64_t flops = 0, drains = 0, ops = 0;
  for (int w = 0, i = 1; w < FLAGS_windows; ++w) {
    const int64_t flops0 = GemmFlops(), drains0 = DeviceDrains(), ops0 = DeviceOps();
    Timer t;
    for (int k = 0; k < FLAGS_steps; ++k) step(i++);
    // Times the host waited for the GPU inside the timed steps (0 on the CPU): each one idles
    // the GPU until the host queues more.
    drains += DeviceDrains() - drains0;
    ops += DeviceOps() - ops0;
    WaitFor(params.values_flat());  // the GPU's queued steps are done
    window_seconds.push_back(t.Seconds() / FLAGS_steps);
    flops += GemmFlops() - flops0;
  }
  const int64_t timed = int64_t{FLAGS_steps} * FLAGS_windows;
  const double waits = static_cast<double>(drains) / timed;
  const double ops_per_step = static_cast<double>(ops) / timed;
  const double seconds = Median(window_seconds);
  const double step_flops = static_cast<double>(flops) / timed;
  std::string rates;
  for (double w : window_seconds) rates += (rates.empty() ? "" : ", ") + StrCat(tokens / w);
  const double achieved = step_flops / seconds / 1e9;
  // The machine may be shared: take the better of the GEMM rates measured before and after.
  if (FLAGS_gemm_rates) gemm_gflops = std::max(gemm_gflops, TypicalGemmGflops(device));
  std::printf(
      "{\"bench\": \"train_step\", \"device\": \"%s\", \"precision\": \"%s\", \"model\": \"%s\", "
      "\"batch\": %d, \"src_len\": %d, "
      "\"tgt_len\": %d, \"vocab\": %d, \"threads\": %d, \"step_seconds\": %.4f, "
      "\"target_tokens_per_s\": %.1f, \"step_gflop\": %.2f, \"achieved_gflops\": %.2f, "
      "\"gemm_gflops\": %.2f, \"mfu\": %.4f, \"peak_gemm_gflops\": %.2f, \"mfu_of_peak\": %.4f, "
      "\"arena_high_water_mib\": %.1f, \"host_waits_per_step\": %.1f, "
      "\"device_ops_per_step\": %.1f, \"gru_layers\": \"%s\", \"windows\": %d, "
      "\"window_tokens_per_s\": [%s]}\n",
      DeviceName(device), FLAGS_precision.c_str(), s.name, s.batch, s.src_len, s.tgt_len, s.vocab,
      FLAGS_threads, seconds, tokens / seconds, step_flops / 1e9, achieved, gemm_gflops,
      gemm_gflops > 0 ? achieved / gemm_gflops : 0.0, peak_gflops,
      peak_gflops > 0 ? achieved / peak_gflops : 0.0,  // 0: --gemm_rates=false, nothing measured
      arena.high_water_bytes() / 1048576.0, waits, ops_per_step,
      WholeGruLayers(device) ? "whole where eligible" : "steps", FLAGS_windows, rates.c_str());
  std::fflush(stdout);
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_threads <= 0) FLAGS_threads = tern::DefaultComputeThreads();
  tern::SetComputeThreads(FLAGS_threads);
  tern::Device device = tern::Device::kCpu;
  if (FLAGS_device == "cuda") {
    if (!tern::CudaAvailable()) {
      std::fprintf(stderr, "bench-train-step: --device cuda: no CUDA GPU visible\n");
      return 2;
    }
    device = tern::Device::kCuda;
  } else if (FLAGS_device != "cpu") {
    std::fprintf(stderr, "bench-train-step: --device must be cpu or cuda\n");
    return 2;
  }
  if (FLAGS_precision != "float32" && FLAGS_precision != "bf16" && FLAGS_precision != "fp16") {
    std::fprintf(stderr, "bench-train-step: --precision must be float32, bf16 or fp16\n");
    return 2;
  }
  if (FLAGS_steps < 1 || FLAGS_windows < 1) {
    std::fprintf(stderr, "bench-train-step: --steps and --windows must be at least 1\n");
    return 2;
  }
  const double gemm = FLAGS_gemm_rates ? tern::TypicalGemmGflops(device) : 0;
  const double peak = FLAGS_gemm_rates ? tern::PeakGemmGflops(device) : 0;
  std::stringstream list(FLAGS_models);
  std::string name;
  while (std::getline(list, name, ',')) {
    if (name == "small")
      tern::Bench({"bible-small", 256, 1024, 4, 3, 8000, 64, 40, 40}, device, gemm, peak);
    else if (name == "base")
      tern::Bench({"transformer-base", 512, 2048, 8, 6, 32000, 64, 32, 32}, device, gemm, peak);
    else if (name == "s2s")  // configs/bible-s2s.pbtxt's shape
      tern::Bench({"bible-s2s", 256, 1024, 1, 1, 8000, 64, 40, 40, "s2s"}, device, gemm, peak);
    else if (name == "s2s-cudnn")  // configs/bible-s2s-cudnn.pbtxt's
      tern::Bench({"bible-s2s-cudnn", 256, 1024, 1, 1, 8000, 64, 40, 40, "s2s-cudnn"}, device, gemm,
                  peak);
    else if (name == "gru")  // bible-s2s's encoder layer
      tern::Bench({"gru-256", 256, 256, 0, 1, 0, 64, 40, 40, "gru"}, device, gemm, peak);
    else if (name == "gru-wmt")  // a Nematus WMT system's (Sennrich et al. 2017)
      tern::Bench({"gru-1024", 512, 1024, 0, 1, 0, 80, 50, 50, "gru"}, device, gemm, peak);
    else {
      std::fprintf(
          stderr,
          "bench-train-step: unknown model '%s' (small, base, s2s, s2s-cudnn, gru, gru-wmt)\n",
          name.c_str());
      return 2;
    }
  }
  return 0;
}
