// training.precision "auto": the choice between float32 and bf16 products, for each kind of run
// and each measurement, and the measurement itself on this CPU.
#include "trainer/precision_choice.h"

#include <gtest/gtest.h>

#include "configs/config_io.h"
#include "tensor/ops.h"

namespace tern::trainer {
namespace {

ProductTimes Times(double float32_seconds, double bf16_seconds) {
  ProductTimes t;
  t.m = 2000;
  t.k = 256;
  t.n = 1024;
  t.float32_seconds = float32_seconds;
  t.bf16_seconds = bf16_seconds;
  return t;
}

TEST(ChoosePrecision, Bf16OnlyWhereTheCpuKernelBeatsFloat32ByTheMargin) {
  PrecisionChoice c = ChoosePrecision(Device::kCpu, false, true, Times(0.020, 0.010));
  EXPECT_EQ(c.precision, "bf16");
  EXPECT_NE(c.why.find("a 2000x256x1024 product took 10.0 ms with bf16 operands, 20.0 ms"),
            std::string::npos)
      << c.why;
  // Faster, but not by the margin: noise and the operands' rounding could eat it.
  EXPECT_EQ(ChoosePrecision(Device::kCpu, false, true, Times(0.0105, 0.010)).precision, "float32");
  // Just past the margin.
  EXPECT_EQ(ChoosePrecision(Device::kCpu, false, true, Times(0.0111, 0.010)).precision, "bf16");
  // A CPU whose BLAS runs float32 faster than the bf16 kernel (as one Xeon measured).
  c = ChoosePrecision(Device::kCpu, false, true, Times(0.010, 0.016));
  EXPECT_EQ(c.precision, "float32");
  EXPECT_NE(c.why.find("does not beat float32 by 1.1x"), std::string::npos) << c.why;
  // The reason names the kernel that was timed.
  ProductTimes amx = Times(0.020, 0.005);
  amx.kernel = "AMX-BF16";
  c = ChoosePrecision(Device::kCpu, false, true, amx);
  EXPECT_EQ(c.why.rfind("AMX-BF16 beats float32", 0), 0u) << c.why;
}

TEST(ChoosePrecision, Float32WithoutTheKernelOnAGpuAndForVirtualWorkers) {
  // The times are not read in these cases: bf16's would win.
  const ProductTimes bf16_wins = Times(0.020, 0.001);
  PrecisionChoice c = ChoosePrecision(Device::kCpu, false, false, bf16_wins);
  EXPECT_EQ(c.precision, "float32");
  EXPECT_NE(c.why.find("no AVX512-BF16"), std::string::npos) << c.why;
  c = ChoosePrecision(Device::kCuda, false, true, bf16_wins);
  EXPECT_EQ(c.precision, "float32");
  EXPECT_NE(c.why.find("GPU"), std::string::npos) << c.why;
  c = ChoosePrecision(Device::kCpu, true, true, bf16_wins);
  EXPECT_EQ(c.precision, "float32");
  EXPECT_NE(c.why.find("virtual workers"), std::string::npos) << c.why;
}

config::TrainConfig Preset(int emb_dim, int ffn_dim, int batch_tokens) {
  config::TrainConfig c;
  c.mutable_model()->set_arch("transformer");
  c.mutable_model()->set_emb_dim(emb_dim);
  c.mutable_model()->set_ffn_dim(ffn_dim);
  c.mutable_data()->set_batch_tokens(batch_tokens);
  return c;
}

TEST(ChoosePrecision, SmallProductsStayFloat32Untimed) {
  ProductTimes t = ProductShape(Preset(64, 128, 600));
  EXPECT_EQ(t.m * t.k * t.n, 600 * 64 * 128);
  t.float32_seconds = 1.;  // not read: bf16 would win
  const PrecisionChoice c = ChoosePrecision(Device::kCpu, false, true, t);
  EXPECT_EQ(c.precision, "float32");
  EXPECT_NE(c.why.find("600x64x128 products are too small"), std::string::npos) << c.why;
}

TEST(ProductShape, TheBatchByTheWidthByTheFeedForwardWidth) {
  const ProductTimes t = ProductShape(Preset(256, 1024, 2000));
  EXPECT_EQ(t.m, 2000);
  EXPECT_EQ(t.k, 256);
  EXPECT_EQ(t.n, 1024);
  EXPECT_GE(t.m * t.k * t.n, kMinTimedProduct);                // the demo's preset is timed
  EXPECT_EQ(ProductShape(Preset(256, 1024, 100000)).m, 4096);  // a start-up check stays short
  EXPECT_EQ(ProductShape(Preset(256, 0, 2000)).n, 1024);       // a GRU model: 4 x the width
}

TEST(ResolveAutoPrecision, MeasuresOnlyWhereThisCpuHasTheKernel) {
  const config::TrainConfig config = Preset(256, 1024, 2000);
  const PrecisionChoice c = ResolveAutoPrecision(config, Device::kCpu);
  if (!NativeProductInputs(Device::kCpu, DType::kBFloat16)) {
    EXPECT_EQ(c.precision, "float32");
    EXPECT_NE(c.why.find("no AVX512-BF16"), std::string::npos) << c.why;
  } else {
    EXPECT_TRUE(c.precision == "float32" || c.precision == "bf16") << c.precision;
    EXPECT_NE(c.why.find("a 2000x256x1024 product took"), std::string::npos) << c.why;
  }
  config::TrainConfig virtual_run = config;
  virtual_run.mutable_distributed()->set_virtual_workers(4);
  EXPECT_EQ(ResolveAutoPrecision(virtual_run, Device::kCpu).precision, "float32");
}

TEST(TimeProducts, TimesBothTypes) {
  if (!NativeProductInputs(Device::kCpu, DType::kBFloat16))
    GTEST_SKIP() << "this CPU has no AVX512-BF16 kernel: auto never times products here";
  const ProductTimes t = TimeProducts(ProductShape(Preset(64, 128, 300)));
  EXPECT_EQ(t.m, 300);
  EXPECT_GT(t.float32_seconds, 0.);
  EXPECT_GT(t.bf16_seconds, 0.);
  EXPECT_LT(t.float32_seconds, 1.);
  EXPECT_LT(t.bf16_seconds, 1.);
}

TEST(TrainingPrecision, AutoIsTheDefaultAndAValueOfItsOwn) {
  config::TrainConfig c = Preset(64, 128, 600);
  config::FillDefaults(&c);
  EXPECT_EQ(c.training().precision(), "auto");
  std::string error;
  EXPECT_TRUE(config::Validate(c, &error)) << error;
  EXPECT_TRUE(config::ApplyOverride("training.precision=float32", &c, &error)) << error;
  EXPECT_EQ(c.training().precision(), "float32");
}

// The start record's products: float32 whatever the device; a 16-bit type with where it runs.
TEST(ProductsName, NamesTheTypeAndWhereItRuns) {
  EXPECT_EQ(ProductsName("float32", Device::kCpu), "float32");
  EXPECT_EQ(ProductsName("auto", Device::kCpu), "float32");
  EXPECT_EQ(ProductsName("bf16", Device::kCuda), "bf16 GPU");
  EXPECT_EQ(ProductsName("fp16", Device::kCpu), "fp16 emulated");
  const std::string bf16 = ProductsName("bf16", Device::kCpu);
  if (NativeProductInputs(Device::kCpu, DType::kBFloat16)) {
    EXPECT_EQ(bf16, std::string("bf16 ") + CpuBf16KernelName());
  } else {
    EXPECT_EQ(bf16, "bf16 emulated");
  }
}

}  // namespace
}  // namespace tern::trainer
