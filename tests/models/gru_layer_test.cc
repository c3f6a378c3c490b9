// Whole GRU layers (models/rnn_layers.h RunGruLayer, RunBiGruLayer -> graph::GruLayer) against the
// step path on the same weights: the outputs and every gradient, on random shapes, lengths and
// masks, in float32, bf16 and fp16 (each at its tolerance), for one layer alone and for whole
// models. On the CPU and the emulated GPU the whole layers are the host reference of
// tensor/cpu/gru_layer.cc (GruLayerMode::kReference); on a GPU with cuDNN they are cuDNN's
// (kAuto), so there this is cuDNN's GRU against Tern's kernels. Also: which layers may run whole
// (the rules and the presets), and that a whole layer's step waits for nothing on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "configs/config_io.h"
#include "graph/graph.h"
#include "graph/ops.h"
#include "models/model.h"
#include "models/rnn_layers.h"
#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/ops.h"

namespace tern::models {
namespace {

// The mode that makes `device` run whole layers: cuDNN on a real GPU, the reference elsewhere.
GruLayerMode WholeMode(Device device) {
  return device == Device::kCuda && !GpuEmulated() ? GruLayerMode::kAuto : GruLayerMode::kReference;
}

// The devices to compare on: the CPU, and the GPU where one is visible; a GPU that cannot run
// whole layers (a build without cuDNN) says so once and is left out.
std::vector<Device> Devices() {
  std::vector<Device> devices = {Device::kCpu};
  if (CudaAvailable()) {
    ScopedGruLayerMode whole(WholeMode(Device::kCuda));
    if (WholeGruLayers(Device::kCuda))
      devices.push_back(Device::kCuda);
    else
      std::printf("[ SKIPPED  ] the GPU: this build has no cuDNN (no whole GRU layers there)\n");
  }
  return devices;
}

// ||a - b|| / max(||b||, 1e-6).
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double{a[i]} - b[i]) * (double{a[i]} - b[i]);
    norm += double{b[i]} * b[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-6);
}

double Tolerance(DType type) {
  switch (type) {
    case DType::kFloat32:
      return 1e-4;
    case DType::kFloat16:
      return 1e-2;
    default:  // bf16: 8 bits of mantissa, and cuDNN keeps the state in it between steps
      return 5e-2;
  }
}

struct LayerShape {
  int64_t len, batch, in, d;
  int dirs;
  bool masked;
};

// One layer's output and every gradient (x's, then the parameters') under the current mode.
std::vector<std::vector<float>> RunLayer(const LayerShape& s, Device device, DType type,
                                         const std::vector<int32_t>& steps) {
  graph::ParamStore params;
  for (const char* p : {"fw", "bw"}) AddGruParams(&params, p, s.in, s.d, false);
  params.Add("x", {s.len, s.batch, s.in}, graph::Init::kNormal, 1.f);
  params.Finalize(device, 21);
  Arena arena(device);
  graph::Graph g(&arena, /*training=*/true, 1);
  g.set_matmul_inputs(type);
  const RnnCtx c{g, params};
  Tensor mask, lengths;
  if (s.masked) {
    std::vector<float> m(s.len * s.batch);
    for (int64_t t = 0; t < s.len; ++t)
      for (int64_t b = 0; b < s.batch; ++b) m[t * s.batch + b] = t < steps[b] ? 1.f : 0.f;
    mask = arena.Alloc({s.len, s.batch});
    Copy(Tensor::FromVector({s.len, s.batch}, m), mask);
    lengths = Tensor::FromInts({s.batch}, steps);
  }
  graph::Var out = s.dirs == 2
                       ? RunBiGruLayer(c, {"fw"}, {"bw"}, c.P("x"), s.d, mask, lengths)
                       : RunGruLayer(c, {"fw"}, c.P("x"), s.d, mask, /*reverse=*/false, lengths);
  EXPECT_EQ(g.node(out).op == graph::OpKind::kGruLayer, GetGruLayerMode() != GruLayerMode::kSteps)
      << "the layer ran another path than its mode's";
  // loss = sum(out * r), r fixed and random: every output's gradient differs.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> r(out.value().numel());
  for (float& v : r) v = dist(rng);
  Tensor weights = arena.Alloc(out.shape());
  Copy(Tensor::FromVector(out.shape(), r), weights);
  params.ZeroGrads();
  g.Backward(graph::Sum(graph::Mul(out, g.Constant(weights))));
  std::vector<std::vector<float>> result = {out.value().ToVector()};
  for (int i = 0; i < params.size(); ++i) result.push_back(params.grad(i).ToVector());
  return result;
}

TEST(WholeGruLayerTest, EqualsTheStepsOnRandomShapesLengthsAndMasks) {
  std::mt19937 rng(2024);
  for (Device device : Devices()) {
    for (DType type : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      for (int trial = 0; trial < 6; ++trial) {
        auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
        LayerShape s{pick(1, 7),    pick(1, 5), pick(1, 9), pick(1, 8), trial % 2 == 0 ? 2 : 1,
                     trial % 3 != 0};
        // A GPU gets one larger layer too, of the sizes cuDNN's kernels are tuned for.
        if (device == Device::kCuda && trial == 5) s = {23, 16, 64, 96, 2, true};
        std::vector<int32_t> steps(s.batch, static_cast<int32_t>(s.len));
        if (s.masked)
          for (int32_t& n : steps) n = pick(1, static_cast<int>(s.len));
        const std::vector<std::vector<float>> stepped = [&] {
          ScopedGruLayerMode m(GruLayerMode::kSteps);
          return RunLayer(s, device, type, steps);
        }();
        const std::vector<std::vector<float>> whole = [&] {
          ScopedGruLayerMode m(WholeMode(device));
          return RunLayer(s, device, type, steps);
        }();
        const char* names[] = {"output", "fw_W",  "fw_Wx", "fw_b",  "fw_bx", "fw_U",  "fw_Ux",
                               "bw_W",   "bw_Wx", "bw_b",  "bw_bx", "bw_U",  "bw_Ux", "x"};
        for (size_t i = 0; i < whole.size(); ++i) {
          if (s.dirs == 1 && i >= 7 && i <= 12) continue;  // bw's parameters unused
          EXPECT_LT(RelativeError(whole[i], stepped[i]), Tolerance(type))
              << (i < std::size(names) ? names[i] : "?") << " on " << DeviceName(device) << " in "
              << DTypeName(type) << ": T " << s.len << ", B " << s.batch << ", in " << s.in
              << ", d " << s.d << ", " << s.dirs << " direction(s)" << (s.masked ? ", masked" : "");
        }
      }
    }
  }
}

// A batch of three sentences, the last two padded, for whole models; src_lengths as the trainer
// makes them.
BatchTensors PaddedBatch(Device device, Arena* arena) {
  auto on = [&](const Tensor& t) {
    Tensor out = arena->Alloc(t.shape(), t.dtype());
    Copy(t, out);
    return out;
  };
  BatchTensors b;
  b.src = on(Tensor::FromInts({3, 6}, {5, 6, 7, 8, 9, 3, 10, 11, 3, 0, 0, 0, 12, 3, 0, 0, 0, 0}));
  b.src_mask =
      on(Tensor::FromVector({3, 6}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0}));
  b.tgt_in = on(Tensor::FromInts({3, 4}, {2, 13, 14, 15, 2, 16, 0, 0, 2, 17, 18, 0}));
  b.tgt_out = on(Tensor::FromInts({3, 4}, {13, 14, 15, 3, 16, 3, 0, 0, 17, 18, 3, 0}));
  b.src_lengths = {6, 3, 2};
  return b;
}

// The model's loss and every parameter's gradient under the current mode.
std::vector<float> RunModel(const config::ModelConfig& mc, Device device, DType type) {
  std::unique_ptr<Model> model = CreateModel(mc, 24);
  graph::ParamStore params;
  model->AddParams(&params);
  params.Finalize(device, 13);
  Arena arena(device);
  const BatchTensors b = PaddedBatch(device, &arena);
  graph::Graph g(&arena, /*training=*/true, 3);
  g.set_matmul_inputs(type);
  params.ZeroGrads();
  graph::Var loss = TokenLoss(g, model->Logits(g, params, b), b.tgt_out, 0.1f);
  int whole_layers = 0;
  for (int id = 0; id < g.size(); ++id) whole_layers += g.node(id).op == graph::OpKind::kGruLayer;
  // The encoder, and the s2s decoder's stacked layer or Devlin's decoder GRU.
  EXPECT_EQ(whole_layers, GetGruLayerMode() == GruLayerMode::kSteps ? 0 : 2) << mc.arch();
  g.Backward(loss);
  std::vector<float> out = params.grads_flat().ToVector();
  out.push_back(loss.value().ToVector()[0]);
  return out;
}

config::ModelConfig TinyModel(const char* arch) {
  config::ModelConfig mc;
  mc.set_arch(arch);
  mc.set_emb_dim(12);
  mc.set_rnn_dim(10);
  mc.set_ffn_dim(14);
  mc.set_fc_depth(2);
  mc.set_ffn_activation("relu");
  mc.set_enc_depth(1);
  mc.set_dec_depth(2);  // s2s: a stacked decoder layer (whole too), after the cGRU
  mc.set_enc_cell_depth(1);
  mc.set_dec_cell_base_depth(2);
  mc.set_dec_cell_high_depth(1);
  mc.set_tied_embeddings(true);
  mc.set_dropout(0.f);
  mc.set_rnn_dropout(0.f);
  mc.set_max_length(64);
  return mc;
}

TEST(WholeGruLayerTest, WholeModelsGiveTheStepsLossAndGradients) {
  // s2s (its bidirectional encoder and its stacked decoder layer whole) and devlin (its encoder
  // and its decoder GRU whole): the loss and every parameter's gradient. So the weights trained
  // either way are the same function of the same data, and the runtime (which runs the steps)
  // decodes them alike.
  for (Device device : Devices()) {
    for (const char* arch : {"s2s", "devlin"}) {
      for (DType type : {DType::kFloat32, DType::kBFloat16}) {
        const config::ModelConfig mc = TinyModel(arch);
        const std::vector<float> stepped = [&] {
          ScopedGruLayerMode m(GruLayerMode::kSteps);
          return RunModel(mc, device, type);
        }();
        const std::vector<float> whole = [&] {
          ScopedGruLayerMode m(WholeMode(device));
          return RunModel(mc, device, type);
        }();
        EXPECT_LT(RelativeError(whole, stepped), Tolerance(type))
            << arch << " on " << DeviceName(device) << " in " << DTypeName(type);
        EXPECT_NEAR(whole.back(), stepped.back(), Tolerance(type) * std::abs(stepped.back()))
            << arch << "'s loss";
      }
    }
  }
}

TEST(WholeGruLayerTest, AWholeLayersStepWaitsForNothingOnAGpu) {
  // Forward and backward of a padded bidirectional layer: the lengths go to cuDNN from the host
  // and to the GPU by a kernel over the mask, so the host never waits for the GPU.
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible";
  ScopedGruLayerMode whole(WholeMode(Device::kCuda));
  if (!WholeGruLayers(Device::kCuda)) GTEST_SKIP() << "this build has no cuDNN";
  const LayerShape s{9, 4, 6, 5, 2, true};
  const std::vector<int32_t> steps = {9, 3, 1, 6};
  RunLayer(s, Device::kCuda, DType::kFloat32, steps);  // warms the plan and the arena
  graph::ParamStore params;
  for (const char* p : {"fw", "bw"}) AddGruParams(&params, p, s.in, s.d, false);
  params.Add("x", {s.len, s.batch, s.in}, graph::Init::kNormal, 1.f);
  params.Finalize(Device::kCuda, 3);
  Arena arena(Device::kCuda);
  Tensor mask = arena.Alloc({s.len, s.batch});
  std::vector<float> m(s.len * s.batch);
  for (int64_t t = 0; t < s.len; ++t)
    for (int64_t b = 0; b < s.batch; ++b) m[t * s.batch + b] = t < steps[b] ? 1.f : 0.f;
  Copy(Tensor::FromVector({s.len, s.batch}, m), mask);
  const Tensor lengths = Tensor::FromInts({s.batch}, steps);
  const int64_t before = DeviceDrains();
  graph::Graph g(&arena, true, 1);
  const RnnCtx c{g, params};
  graph::Var out = RunBiGruLayer(c, {"fw"}, {"bw"}, c.P("x"), s.d, mask, lengths);
  EXPECT_EQ(g.node(out).op, graph::OpKind::kGruLayer);
  g.Backward(graph::Sum(out));
  EXPECT_EQ(DeviceDrains(), before) << "the host waited for the GPU in a whole layer's step";
}

TEST(WholeGruLayerTest, TheRulesSayWhichLayersRunWhole) {
  GruLayerCase ok;
  ok.device_runs_whole_layers = true;
  ok.steps = 5;
  ok.batch = 2;
  EXPECT_EQ(WholeGruLayerRefusal(ok), nullptr);
  auto refused = [&](auto change) {
    GruLayerCase c = ok;
    change(c);
    return WholeGruLayerRefusal(c) != nullptr;
  };
  EXPECT_TRUE(refused([](GruLayerCase& c) { c.device_runs_whole_layers = false; }));
  EXPECT_TRUE(refused([](GruLayerCase& c) { c.layer_norm = true; }));
  EXPECT_TRUE(refused([](GruLayerCase& c) { c.state_dropout = true; }));
  EXPECT_TRUE(refused([](GruLayerCase& c) { c.cells = 2; }));
  EXPECT_TRUE(refused([](GruLayerCase& c) { c.right_to_left_alone = true; }));
  EXPECT_TRUE(refused([](GruLayerCase& c) { c.steps = 0; }));
  EXPECT_TRUE(refused([](GruLayerCase& c) { c.masked = true; }));  // no lengths
  const Tensor good = Tensor::FromInts({2}, {5, 1}), empty = Tensor::FromInts({2}, {5, 0}),
               long_one = Tensor::FromInts({2}, {6, 1});
  EXPECT_FALSE(refused([&](GruLayerCase& c) { c.masked = true, c.lengths = good; }));
  EXPECT_TRUE(refused([&](GruLayerCase& c) { c.masked = true, c.lengths = empty; }));
  EXPECT_TRUE(refused([&](GruLayerCase& c) { c.masked = true, c.lengths = long_one; }));
}

TEST(WholeGruLayerTest, ThePresetsThatRunWholeLayers) {
  // docs/gpu.md's table: bible-s2s normalizes inside its cells and drops out its state (Tern's
  // kernels); bible-s2s-cudnn and bible-devlin do neither (cuDNN's, training and validating).
  struct Preset {
    const char* file;
    bool whole_in_training;
  };
  for (const Preset& p : {Preset{"bible-s2s.pbtxt", false}, Preset{"bible-s2s-cudnn.pbtxt", true},
                          Preset{"bible-devlin.pbtxt", true}}) {
    config::TrainConfig c;
    std::string error;
    ASSERT_TRUE(
        config::LoadTrainConfig(std::string(TERN_SOURCE_DIR) + "/configs/" + p.file, &c, &error))
        << error;
    GruLayerCase layer;
    layer.device_runs_whole_layers = true;
    layer.layer_norm = c.model().layer_normalization();
    layer.state_dropout = c.model().rnn_dropout() > 0.f;
    layer.cells = c.model().enc_cell_depth() == 0 ? 1 : c.model().enc_cell_depth();
    layer.steps = 10;
    layer.batch = 4;
    EXPECT_EQ(WholeGruLayerRefusal(layer) == nullptr, p.whole_in_training) << p.file;
  }
}

}  // namespace
}  // namespace tern::models
