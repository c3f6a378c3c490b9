// Every CUDA kernel against the CPU kernel of the same name, in the manner of ggml's
// test-backend-ops: a case builds its tensors on the CPU from a seed, runs the same op on them and
// on CUDA copies of them, then compares every tensor (outputs, accumulated gradients, and the
// inputs, which must be left alone) with a per-dtype tolerance. Without a visible GPU each test
// skips, except the one that checks that the absence is reported cleanly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "common/error.h"
#include "tensor/allocator.h"
#include "tensor/arena.h"
#include "tensor/ops.h"
#include "tests/tensor/random_tensor.h"

namespace tern {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!CudaAvailable()) GTEST_SKIP() << "no CUDA GPU visible"

struct Tolerance {
  double abs;
  double rel;
};

Tolerance DefaultTolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {1e-5, 1e-4};
    case DType::kBFloat16:
      return {1e-2, 1e-2};
    case DType::kFloat16:
      return {1e-3, 1e-3};
    default:
      return {0, 0};  // integers: exact
  }
}

using testing::RandomTensor;

Tensor RandomIds(int64_t n, int32_t limit, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, limit - 1);
  std::vector<int32_t> ids(n);
  for (int32_t& id : ids) id = dist(rng);
  return Tensor::FromInts({n}, ids);
}

Tensor To(const Tensor& t, Device device) {
  if (!t.defined()) return t;
  Tensor out = Tensor::Empty(t.shape(), t.dtype(), device);
  Copy(t, out);
  return out;
}

// Runs `op` on `cpu_args` and on CUDA copies of them, then compares argument by argument.
// tolerance_for(i) overrides the per-dtype tolerance of argument i when given.
void ExpectSameOnCpuAndCuda(std::vector<Tensor> cpu_args,
                            const std::function<void(const std::vector<Tensor>&)>& op,
                            const std::function<Tolerance(int)>& tolerance_for = nullptr) {
  std::vector<Tensor> cuda_args;
  for (const Tensor& t : cpu_args) cuda_args.push_back(To(t, Device::kCuda));
  op(cpu_args);
  op(cuda_args);
  for (size_t i = 0; i < cpu_args.size(); ++i) {
    if (!cpu_args[i].defined()) continue;
    Tensor back = To(cuda_args[i], Device::kCpu);
    const Tolerance tol =
        tolerance_for ? tolerance_for(static_cast<int>(i)) : DefaultTolerance(back.dtype());
    int reported = 0;
    for (int64_t j = 0; j < back.numel() && reported < 5; ++j) {
      double expected, actual;
      if (back.dtype() == DType::kInt32) {
        expected = cpu_args[i].i32()[j];
        actual = back.i32()[j];
      } else {
        expected = cpu_args[i].f32()[j];
        actual = back.f32()[j];
      }
      const double allowed = tol.abs + tol.rel * std::fabs(expected);
      // An infinity or NaN matches its like (inf - inf is NaN, and no NaN is within a tolerance).
      const bool alike = expected == actual || (std::isnan(expected) && std::isnan(actual));
      if (!alike && !(std::fabs(expected - actual) <= allowed)) {
        ADD_FAILURE() << "argument " << i << " element " << j << ": cpu " << expected << " cuda "
                      << actual << " (allowed " << allowed << ")";
        ++reported;
      }
    }
  }
}

TEST(CudaBackendTest, MissingGpuIsReportedCleanly) {
  if (CudaAvailable()) {
    Tensor t = Tensor::Zeros({3}, DType::kFloat32, Device::kCuda);
    EXPECT_EQ(To(t, Device::kCpu).ToVector(), std::vector<float>(3, 0.f));
    return;
  }
  // No GPU (or a build without CUDA): a user error with a message, never a crash.
  EXPECT_THROW(Tensor::Empty({4}, DType::kFloat32, Device::kCuda), Error);
}

TEST(CudaBackendTest, AllocatorReusesFreedBlocks) {
  SKIP_WITHOUT_CUDA();
  Allocator* allocator = AllocatorFor(Device::kCuda);
  void* p = allocator->Allocate(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAlignment, 0u);
  allocator->Free(p);
  void* q = allocator->Allocate(1000);
  // Served from the cache, no cudaMalloc (the emulated GPU's allocator has no cache).
  if (!GpuEmulated()) {
    EXPECT_EQ(p, q);
  }
  allocator->Free(q);
}

TEST(CudaBackendTest, ArenaAllocZerosAndSteadyState) {
  SKIP_WITHOUT_CUDA();
  Arena arena(Device::kCuda, 4096);
  for (int step = 0; step < 3; ++step) {
    Tensor junk = arena.Alloc({2000});
    Fill(junk, 7.f);
    arena.Reset();
    Tensor zeros = arena.AllocZeros({2000});
    EXPECT_EQ(To(zeros, Device::kCpu).ToVector(), std::vector<float>(2000, 0.f));
    Tensor bytes = arena.AllocZeros({13}, DType::kInt8);  // not a whole number of floats
    std::vector<int8_t> host(13, 1);
    CopyBytes(host.data(), Device::kCpu, bytes.raw(), Device::kCuda, 13);
    EXPECT_EQ(host, std::vector<int8_t>(13, 0));
    arena.Reset();
  }
  const int64_t allocations = arena.system_allocations();
  arena.Alloc({2000});
  arena.Reset();
  EXPECT_EQ(arena.system_allocations(), allocations);
}

TEST(CudaBackendTest, PinnedHostMemoryCopiesBothWaysExactly) {
  SKIP_WITHOUT_CUDA();
  if (!GpuEmulated()) {
    EXPECT_NE(PinnedHostAllocator(), AllocatorFor(Device::kCpu)) << "not page-locked";
  }
  Tensor host = RandomTensor({1000, 33}, 3), pinned = Tensor::PinnedZeros(host.shape());
  Tensor gpu = Tensor::Empty(host.shape(), DType::kFloat32, Device::kCuda);
  Copy(host, gpu);
  Copy(gpu, pinned);
  Copy(pinned, gpu);
  Tensor back = Tensor::Zeros(host.shape());
  Copy(gpu, back);
  for (int64_t i = 0; i < host.numel(); ++i) ASSERT_EQ(back.at(i), host.at(i)) << i;
}

TEST(CudaBackendTest, CopyRoundTripsExactly) {
  SKIP_WITHOUT_CUDA();
  Tensor a = RandomTensor({5, 7}, 1);
  Tensor d1 = To(a, Device::kCuda), d2 = Tensor::Empty({5, 7}, DType::kFloat32, Device::kCuda);
  Copy(d1, d2);  // device to device
  EXPECT_EQ(To(d2, Device::kCpu).ToVector(), a.ToVector());
}

TEST(CudaKernelsTest, GemmAllTransposes) {
  SKIP_WITHOUT_CUDA();
  const int m = 37, k = 129, n = 65;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      ExpectSameOnCpuAndCuda(
          {RandomTensor(ta ? Shape{k, m} : Shape{m, k}, 1),
           RandomTensor(tb ? Shape{n, k} : Shape{k, n}, 2), RandomTensor({m, n}, 3)},
          [&](const std::vector<Tensor>& t) { Gemm(t[0], ta, t[1], tb, t[2], 1.5f, 0.5f); },
          [](int) {
            return Tolerance{1e-4, 1e-4};
          });
    }
  }
}

// The bias in cuBLASLt's epilogue (or, where it offers no algorithm, added after): every
// transpose, float32 and both half types, odd sizes, and operands and bias one float off the
// pool's alignment.
TEST(CudaKernelsTest, GemmBiasEqualsTheCpuProductPlusBias) {
  SKIP_WITHOUT_CUDA();
  const int64_t m = 37, k = 29, n = 53;
  for (DType inputs : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    for (bool trans_a : {false, true}) {
      for (bool trans_b : {false, true}) {
        for (int64_t offset : {0, 1}) {
          const Shape sa = trans_a ? Shape{k, m} : Shape{m, k};
          const Shape sb = trans_b ? Shape{n, k} : Shape{k, n};
          const Tensor a = RandomTensor({offset + sa.numel()}, 40),
                       b = RandomTensor({offset + sb.numel()}, 41),
                       bias = RandomTensor({offset + n}, 42);
          auto view = [&](const Tensor& t, const Shape& s) {
            return Tensor(t.f32() + offset, s, DType::kFloat32, t.device());
          };
          ExpectSameOnCpuAndCuda(
              {a, b, bias, Tensor::Empty({m, n})},
              [&](const std::vector<Tensor>& t) {
                GemmBias(view(t[0], sa), trans_a, view(t[1], sb), trans_b, view(t[2], Shape{n}),
                         t[3], inputs);
              },
              [&](int) {
                return inputs == DType::kFloat32 ? Tolerance{1e-4, 1e-4} : Tolerance{2e-3, 2e-3};
              });
          // With an activation (cuBLASLt's RELU_BIAS and GELU_BIAS epilogues).
          for (int f : {kRelu, kGelu}) {
            ExpectSameOnCpuAndCuda(
                {a, b, bias, Tensor::Empty({m, n})},
                [&](const std::vector<Tensor>& t) {
                  GemmBias(view(t[0], sa), trans_a, view(t[1], sb), trans_b, view(t[2], Shape{n}),
                           t[3], inputs, Tensor(), f);
                },
                [&](int) {
                  return inputs == DType::kFloat32 ? Tolerance{1e-4, 1e-4} : Tolerance{2e-3, 2e-3};
                });
          }
          // With a residual (cuBLASLt's C operand), itself off the alignment too.
          const Tensor residual = RandomTensor({offset + m * n}, 43);
          ExpectSameOnCpuAndCuda(
              {a, b, bias, residual, Tensor::Empty({m, n})},
              [&](const std::vector<Tensor>& t) {
                GemmBias(view(t[0], sa), trans_a, view(t[1], sb), trans_b, view(t[2], Shape{n}),
                         t[4], inputs, view(t[3], Shape{m, n}));
              },
              [&](int) {
                return inputs == DType::kFloat32 ? Tolerance{1e-4, 1e-4} : Tolerance{2e-3, 2e-3};
              });
        }
      }
    }
  }
}

// One a times a batch of b (a's batch stride 0 in cuBLASLt), with the bias strided by the batch:
// a decoder step's queries, keys and values in one product.
TEST(CudaKernelsTest, GemmBiasOfOneAAndABatchOfB) {
  SKIP_WITHOUT_CUDA();
  const int64_t m = 5, k = 64, n = 64, batch = 3;
  for (DType inputs : {DType::kFloat32, DType::kBFloat16}) {
    for (bool trans_b : {false, true}) {
      ExpectSameOnCpuAndCuda(
          {RandomTensor({m, k}, 50), RandomTensor({batch, trans_b ? n : k, trans_b ? k : n}, 51),
           RandomTensor({batch, n}, 52), Tensor::Empty({batch, m, n})},
          [&](const std::vector<Tensor>& t) {
            GemmBias(t[0], false, t[1], trans_b, t[2], t[3], inputs);
          },
          [&](int) {
            return inputs == DType::kFloat32 ? Tolerance{1e-4, 1e-4} : Tolerance{2e-3, 2e-3};
          });
    }
  }
}

TEST(CudaKernelsTest, BatchedGemmAllTransposes) {
  SKIP_WITHOUT_CUDA();
  const int batch = 6, m = 9, k = 17, n = 11;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      ExpectSameOnCpuAndCuda(
          {RandomTensor(ta ? Shape{batch, k, m} : Shape{batch, m, k}, 4),
           RandomTensor(tb ? Shape{batch, n, k} : Shape{batch, k, n}, 5),
           RandomTensor({batch, m, n}, 6)},
          [&](const std::vector<Tensor>& t) { Gemm(t[0], ta, t[1], tb, t[2], 1.f, 1.f); },
          [](int) {
            return Tolerance{1e-4, 1e-4};
          });
    }
  }
}

// Mixed precision: the tensor cores' product of bf16/fp16 operands against the CPU's float32
// product of the same rounded operands. The products of the rounded values are exact in
// float32, so only the order of the sums differs; the float32 product differs far more.
TEST(CudaKernelsTest, MixedPrecisionGemmEqualsTheCpusRounding) {
  SKIP_WITHOUT_CUDA();
  const int m = 37, k = 129, n = 65, batch = 3;
  for (DType type : {DType::kBFloat16, DType::kFloat16}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        ExpectSameOnCpuAndCuda(
            {RandomTensor(ta ? Shape{k, m} : Shape{m, k}, 1),
             RandomTensor(tb ? Shape{n, k} : Shape{k, n}, 2), RandomTensor({m, n}, 3)},
            [&](const std::vector<Tensor>& t) { Gemm(t[0], ta, t[1], tb, t[2], 1.5f, 0.5f, type); },
            [](int) {
              return Tolerance{2e-4, 2e-5};
            });
      }
    }
    ExpectSameOnCpuAndCuda(
        {RandomTensor({batch, m, k}, 4), RandomTensor({batch, n, k}, 5),
         RandomTensor({batch, m, n}, 6)},
        [&](const std::vector<Tensor>& t) { Gemm(t[0], false, t[1], true, t[2], 1.f, 1.f, type); },
        [](int) {
          return Tolerance{2e-4, 2e-5};
        });
    // The tolerance above does tell the rounding apart: float32 operands differ by more.
    Tensor a = RandomTensor({m, k}, 1), b = RandomTensor({k, n}, 2);
    Tensor mixed = Tensor::Zeros({m, n}), plain = Tensor::Zeros({m, n});
    Gemm(a, false, b, false, mixed, 1.f, 0.f, type);
    Gemm(a, false, b, false, plain);
    double worst = 0;
    for (int64_t i = 0; i < m * n; ++i)
      worst = std::max(worst, std::fabs(double{mixed.f32()[i]} - plain.f32()[i]));
    EXPECT_GT(worst, 1e-3) << DTypeName(type);
  }
}

TEST(CudaKernelsTest, MixedPrecisionOperandsNeedNoAlignment) {
  // An operand one float past an aligned address is rounded one element at a time; the product
  // equals that of an aligned copy bit for bit.
  SKIP_WITHOUT_CUDA();
  const int m = 9, k = 31, n = 6;
  const Tensor a = RandomTensor({m, k}, 1), b = RandomTensor({k, n}, 2);
  Tensor buffer = Tensor::Empty({m * k + 1}, DType::kFloat32, Device::kCuda);
  const Tensor shifted(buffer.f32() + 1, Shape{m, k}, DType::kFloat32, Device::kCuda);
  Copy(a, shifted);
  const Tensor aligned = To(a, Device::kCuda), b_gpu = To(b, Device::kCuda);
  for (DType type : {DType::kBFloat16, DType::kFloat16}) {
    Tensor c1 = Tensor::Zeros({m, n}, DType::kFloat32, Device::kCuda);
    Tensor c2 = Tensor::Zeros({m, n}, DType::kFloat32, Device::kCuda);
    Gemm(shifted, false, b_gpu, false, c1, 1.f, 0.f, type);
    Gemm(aligned, false, b_gpu, false, c2, 1.f, 0.f, type);
    const Tensor h1 = To(c1, Device::kCpu), h2 = To(c2, Device::kCpu);
    for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(h1.f32()[i], h2.f32()[i]) << DTypeName(type);
  }
}

TEST(CudaKernelsTest, OperandsRoundedAheadAreTheCpusBitsAndTheSameProduct) {
  // RoundOperand on the GPU stores the CPU's 16 bits; a product of such operands equals, bit for
  // bit, the product that rounds float32 operands itself.
  SKIP_WITHOUT_CUDA();
  const int m = 19, k = 67, n = 33;
  const Tensor a = RandomTensor({m, k}, 1), b = RandomTensor({n, k}, 2);
  const Tensor a_gpu = To(a, Device::kCuda), b_gpu = To(b, Device::kCuda);
  for (DType type : {DType::kBFloat16, DType::kFloat16}) {
    Tensor a16_cpu = Tensor::Empty(a.shape(), type);
    Tensor a16 = Tensor::Empty(a.shape(), type, Device::kCuda);
    Tensor b16 = Tensor::Empty(b.shape(), type, Device::kCuda);
    RoundOperand(a, a16_cpu);
    RoundOperand(a_gpu, a16);
    RoundOperand(b_gpu, b16);
    const Tensor back = To(a16, Device::kCpu);
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(back.data<uint16_t>()[i], a16_cpu.data<uint16_t>()[i]) << DTypeName(type) << i;
    Tensor c_each = Tensor::Zeros({m, n}, DType::kFloat32, Device::kCuda);
    Tensor c_ahead = Tensor::Zeros({m, n}, DType::kFloat32, Device::kCuda);
    Gemm(a_gpu, false, b_gpu, true, c_each, 1.f, 0.f, type);
    Gemm(a16, false, b16, true, c_ahead, 1.f, 0.f, type);
    const Tensor h1 = To(c_each, Device::kCpu), h2 = To(c_ahead, Device::kCpu);
    for (int64_t i = 0; i < m * n; ++i) ASSERT_EQ(h1.f32()[i], h2.f32()[i]) << DTypeName(type);
  }
}

TEST(CudaKernelsTest, GemmFlattensRank3TimesMatrix) {
  SKIP_WITHOUT_CUDA();
  ExpectSameOnCpuAndCuda(
      {RandomTensor({3, 4, 8}, 7), RandomTensor({5, 8}, 8), RandomTensor({3, 4, 5}, 9)},
      [](const std::vector<Tensor>& t) { Gemm(t[0], false, t[1], true, t[2]); },
      [](int) {
        return Tolerance{1e-4, 1e-4};
      });
}

TEST(CudaKernelsTest, FillAddMulScale) {
  SKIP_WITHOUT_CUDA();
  const Shape s{1000, 33};
  ExpectSameOnCpuAndCuda({RandomTensor(s, 1)},
                         [](const std::vector<Tensor>& t) { Fill(t[0], 0.f); });
  ExpectSameOnCpuAndCuda({RandomTensor(s, 1)},
                         [](const std::vector<Tensor>& t) { Fill(t[0], -2.5f); });
  ExpectSameOnCpuAndCuda({RandomTensor(s, 1), RandomTensor(s, 2), RandomTensor(s, 3)},
                         [](const std::vector<Tensor>& t) { Add(t[0], t[1], t[2], 0.5f, -2.f); });
  ExpectSameOnCpuAndCuda({RandomTensor(s, 1), RandomTensor(s, 2)},
                         [](const std::vector<Tensor>& t) { Axpy(3.f, t[0], t[1]); });  // aliased
  ExpectSameOnCpuAndCuda({RandomTensor(s, 1)},
                         [](const std::vector<Tensor>& t) { Scale(t[0], 0.3f); });
  for (bool accumulate : {false, true}) {
    ExpectSameOnCpuAndCuda(
        {RandomTensor(s, 1), RandomTensor(s, 2), RandomTensor(s, 3)},
        [&](const std::vector<Tensor>& t) { Mul(t[0], t[1], t[2], accumulate); });
  }
}

TEST(CudaKernelsTest, AddBiasAndSumRows) {
  SKIP_WITHOUT_CUDA();
  ExpectSameOnCpuAndCuda({RandomTensor({300, 77}, 1), RandomTensor({77}, 2)},
                         [](const std::vector<Tensor>& t) { AddBias(t[0], t[1]); });
  // 1000 x 77 sums in 4 chunks of rows, 5000 x 600 in 20, 40 x 9 in one.
  for (Shape shape : {Shape{1000, 77}, Shape{5000, 600}, Shape{40, 9}}) {
    for (float beta : {0.f, 1.f, 0.5f}) {
      ExpectSameOnCpuAndCuda(
          {RandomTensor(shape, 3), RandomTensor({shape[1]}, 4)},
          [&](const std::vector<Tensor>& t) { SumRows(t[0], t[1], beta); },
          [&](int) {
            // A float sum's error grows with its terms: 1e-4 per 1000 rows of values near 1
            // (a column of 5000 that cancels to -0.17 was seen 1.2e-4 apart).
            return Tolerance{1e-4 * std::max<int64_t>(1, shape[0] / 1000), 1e-4};
          });
    }
  }
}

TEST(CudaKernelsTest, ClipByNormOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  // Longer than the clip (scaled), shorter (left alone), and a long one of many blocks.
  for (float clip : {0.5f, 1e6f}) {
    ExpectSameOnCpuAndCuda({RandomTensor({1000}, 34)},
                           [&](const std::vector<Tensor>& t) { ClipByNorm(t[0], clip); });
  }
  ExpectSameOnCpuAndCuda({RandomTensor({5000003}, 35)},
                         [](const std::vector<Tensor>& t) { ClipByNorm(t[0], 3.f); });
  // The halves sync SGD uses, a squared norm of other ranks and a non-finite one (factor 0).
  ExpectSameOnCpuAndCuda({RandomTensor({100003}, 36), Tensor::Empty({1})},
                         [](const std::vector<Tensor>& t) { SumSquaresTo(t[0], t[1]); });
  for (float sq : {1e6f, INFINITY, NAN}) {
    ExpectSameOnCpuAndCuda({RandomTensor({70001}, 37), Tensor::FromVector({1}, {sq})},
                           [](const std::vector<Tensor>& t) { ClipToNorm(t[0], t[1], 2.f); });
  }
  Tensor empty_sum = To(Tensor::FromVector({1}, {7.f}), Device::kCuda);
  SumSquaresTo(Tensor::Empty({0}, DType::kFloat32, Device::kCuda), empty_sum);
  EXPECT_EQ(To(empty_sum, Device::kCpu).at(0), 0.f) << "an empty shard's squared norm";
}

TEST(CudaKernelsTest, DivideRows) {
  SKIP_WITHOUT_CUDA();
  // Positive divisors (counts, as the AAN decoder divides by), exact like the CPU's division.
  Tensor divisors = RandomTensor({300}, 6);
  for (int64_t r = 0; r < 300; ++r) divisors.f32()[r] = 1.f + std::fabs(divisors.f32()[r]) * 9.f;
  ExpectSameOnCpuAndCuda({RandomTensor({300, 77}, 5), divisors},
                         [](const std::vector<Tensor>& t) { DivideRows(t[0], t[1]); });
}

TEST(CudaKernelsTest, ClampGruCellAndAttentionScoresForwardAndBackward) {
  SKIP_WITHOUT_CUDA();
  ExpectSameOnCpuAndCuda({RandomTensor({1000}, 7)},
                         [](const std::vector<Tensor>& t) { Clamp(t[0], 0.f, 0.5f); });
  // 300 rows of a 257-wide GRU: per-row and broadcast inputs, with a mask of 1, 0 and halves.
  const int64_t rows = 300, d = 257;
  Tensor mask = Tensor::Empty({rows});
  for (int64_t r = 0; r < rows; ++r) mask.f32()[r] = r % 3 == 0 ? 1.f : (r % 3 == 1 ? 0.f : .5f);
  for (int64_t in_rows : {rows, int64_t{1}}) {
    for (bool masked : {false, true}) {
      ExpectSameOnCpuAndCuda(
          {RandomTensor({in_rows, 2 * d}, 8), RandomTensor({in_rows, d}, 9),
           RandomTensor({rows, 2 * d}, 10), RandomTensor({rows, d}, 11),
           RandomTensor({rows, d}, 12), masked ? mask : Tensor(), Tensor::Empty({rows, d})},
          [](const std::vector<Tensor>& t) { GruCell(t[0], t[1], t[2], t[3], t[4], t[5], t[6]); });
      // The backward: d_rz and d_h written, d_su_h and ds accumulated into.
      ExpectSameOnCpuAndCuda(
          {RandomTensor({in_rows, 2 * d}, 8), RandomTensor({in_rows, d}, 9),
           RandomTensor({rows, 2 * d}, 10), RandomTensor({rows, d}, 11),
           RandomTensor({rows, d}, 12), masked ? mask : Tensor(), RandomTensor({rows, d}, 13),
           Tensor::Empty({rows, 2 * d}), Tensor::Empty({rows, d}), RandomTensor({rows, d}, 14),
           RandomTensor({rows, d}, 15)},
          [](const std::vector<Tensor>& t) {
            GruCellBackward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10]);
          });
    }
  }
  // 5 sentences of 37 positions, beam 4, c 100 (not a multiple of the warp).
  ExpectSameOnCpuAndCuda(
      {RandomTensor({20, 100}, 13), RandomTensor({5, 37, 100}, 14), RandomTensor({100}, 15),
       Tensor::Empty({20, 37})},
      [](const std::vector<Tensor>& t) { AdditiveAttentionScores(t[0], t[1], t[2], t[3]); });
  // Its backward (training: beam 1), accumulating into every gradient; sums over 37 positions
  // and over 6 x 37 for du, so looser than one element's.
  ExpectSameOnCpuAndCuda(
      {RandomTensor({6, 100}, 16), RandomTensor({6, 37, 100}, 17), RandomTensor({100}, 18),
       RandomTensor({6, 37}, 19), RandomTensor({6, 100}, 20), RandomTensor({6, 37, 100}, 21),
       RandomTensor({100}, 22)},
      [](const std::vector<Tensor>& t) {
        AdditiveAttentionScoresBackward(t[0], t[1], t[2], t[3], t[4], t[5], t[6]);
      },
      [](int) {
        return Tolerance{1e-4, 1e-4};
      });
}

TEST(CudaKernelsTest, UnaryAndBackward) {
  SKIP_WITHOUT_CUDA();
  for (UnaryOp op : {kRelu, kTanh, kSigmoid, kGelu, kSwish}) {
    ExpectSameOnCpuAndCuda({RandomTensor({100, 31}, 1, 3.f), RandomTensor({100, 31}, 2)},
                           [&](const std::vector<Tensor>& t) { Unary(op, t[0], t[1]); });
  }
  for (UnaryOp op : {kRelu, kTanh, kSigmoid, kGelu, kSwish}) {
    Tensor x = RandomTensor({100, 31}, 3, 3.f), y = Tensor::Empty({100, 31});
    Unary(op, x, y);
    if (op == kGelu || op == kSwish) y = x;  // their backwards take the input
    for (bool accumulate : {true, false}) {  // into dx's random values, or over them
      ExpectSameOnCpuAndCuda(
          {y, RandomTensor({100, 31}, 4), RandomTensor({100, 31}, 5)},
          [&](const std::vector<Tensor>& t) { UnaryBackward(op, t[0], t[1], t[2], accumulate); });
    }
  }
}

TEST(CudaKernelsTest, SoftmaxPlainMaskedCausalAndWide) {
  SKIP_WITHOUT_CUDA();
  ExpectSameOnCpuAndCuda(
      {RandomTensor({20, 37}, 1), RandomTensor({20, 37}, 2)},
      [](const std::vector<Tensor>& t) { Softmax(t[0], t[1], Tensor(), false, 0.7f); });
  ExpectSameOnCpuAndCuda({RandomTensor({3, 3000}, 3), RandomTensor({3, 3000}, 4)},
                         [](const std::vector<Tensor>& t) { Softmax(t[0], t[1]); });
  // Batch 1 has every key masked: its rows must come out all 0.
  std::vector<float> keep(3 * 9, 1.f);
  keep[2] = keep[7] = 0.f;
  for (int k = 9; k < 18; ++k) keep[k] = 0.f;
  Tensor mask = Tensor::FromVector({3, 9}, keep);
  for (bool causal : {false, true}) {
    for (bool masked : {false, true}) {
      if (!causal && !masked) continue;
      ExpectSameOnCpuAndCuda(
          {RandomTensor({3, 2, 9, 9}, 5), RandomTensor({3, 2, 9, 9}, 6), masked ? mask : Tensor()},
          [&](const std::vector<Tensor>& t) { Softmax(t[0], t[1], t[2], causal, 0.5f); });
    }
  }
}

TEST(CudaKernelsTest, SoftmaxBackwardAndLogSoftmax) {
  SKIP_WITHOUT_CUDA();
  Tensor y = Tensor::Empty({40, 53});
  Softmax(RandomTensor({40, 53}, 1), y);
  for (bool accumulate : {true, false}) {
    ExpectSameOnCpuAndCuda(
        {y, RandomTensor({40, 53}, 2), RandomTensor({40, 53}, 3)},
        [&](const std::vector<Tensor>& t) { SoftmaxBackward(t[0], t[1], t[2], 0.8f, accumulate); });
  }
  ExpectSameOnCpuAndCuda({RandomTensor({5, 5000}, 4, 3.f), RandomTensor({5, 5000}, 5)},
                         [](const std::vector<Tensor>& t) { LogSoftmax(t[0], t[1]); });
}

// LayerNorm and its backward on (rows, n) against the CPU.
void ExpectLayerNormMatches(int rows, int n) {
  auto forward = [](const std::vector<Tensor>& t) {
    LayerNorm(t[0], t[1], t[2], t[3], t[4], t[5], 1e-5f);
  };
  ExpectSameOnCpuAndCuda(
      {RandomTensor({rows, n}, 1, 2.f), RandomTensor({n}, 2), RandomTensor({n}, 3),
       RandomTensor({rows, n}, 4), RandomTensor({rows}, 5), RandomTensor({rows}, 6)},
      forward);
  Tensor x = RandomTensor({rows, n}, 1, 2.f), gamma = RandomTensor({n}, 2);
  Tensor out = Tensor::Empty({rows, n}), mean = Tensor::Empty({rows}), rstd = Tensor::Empty({rows});
  LayerNorm(x, gamma, RandomTensor({n}, 3), out, mean, rstd, 1e-5f);
  for (bool params : {true, false}) {
    // dx added into, with the parameters' gradients; or written, without.
    const bool accumulate = params;
    ExpectSameOnCpuAndCuda(
        {x, gamma, mean, rstd, RandomTensor({rows, n}, 7), RandomTensor({rows, n}, 8),
         params ? RandomTensor({n}, 9) : Tensor(), params ? RandomTensor({n}, 10) : Tensor()},
        [=](const std::vector<Tensor>& t) {
          LayerNormBackward(t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], accumulate);
        },
        [](int) {
          return Tolerance{1e-4, 1e-4};
        });
  }
}

TEST(CudaKernelsTest, LayerNormAndBackward) {
  SKIP_WITHOUT_CUDA();
  // 200 rows: dgamma/dbeta in one chunk of rows; 3000: in 12 chunks added in order.
  for (int rows : {200, 3000}) ExpectLayerNormMatches(rows, 96);
}

TEST(CudaKernelsTest, CrossEntropyAndBackward) {
  SKIP_WITHOUT_CUDA();
  const int rows = 64, v = 1000, ignore = 3;
  Tensor targets = RandomIds(rows, v, 1);
  targets.i32()[5] = ignore;
  for (float smoothing : {0.f, 0.1f}) {
    ExpectSameOnCpuAndCuda({RandomTensor({rows, v}, 2, 2.f), targets, RandomTensor({rows}, 3),
                            RandomTensor({rows}, 4)},
                           [&](const std::vector<Tensor>& t) {
                             CrossEntropy(t[0], t[1], smoothing, ignore, t[2], t[3]);
                           });
    Tensor logits = RandomTensor({rows, v}, 2, 2.f), loss = Tensor::Empty({rows}),
           lse = Tensor::Empty({rows});
    CrossEntropy(logits, targets, smoothing, ignore, loss, lse);
    // dlogits holds random values: added into, or written over (ignored rows too).
    for (bool accumulate : {true, false}) {
      ExpectSameOnCpuAndCuda(
          {logits, targets, lse, RandomTensor({rows}, 5), RandomTensor({rows, v}, 6)},
          [&](const std::vector<Tensor>& t) {
            CrossEntropyBackward(t[0], t[1], smoothing, ignore, t[2], t[3], t[4], accumulate);
          });
    }
  }
}

TEST(CudaKernelsTest, GatherAndScatterRows) {
  SKIP_WITHOUT_CUDA();
  const int vocab = 50, d = 24, n = 300;  // n > vocab: ids repeat
  ExpectSameOnCpuAndCuda(
      {RandomTensor({vocab, d}, 1), RandomIds(n, vocab, 2), RandomTensor({n, d}, 3)},
      [](const std::vector<Tensor>& t) { GatherRows(t[0], t[1], t[2], 2.f); });
  ExpectSameOnCpuAndCuda(
      {RandomTensor({n, d}, 4), RandomIds(n, vocab, 5), RandomTensor({vocab, d}, 6)},
      [](const std::vector<Tensor>& t) { ScatterAddRows(t[0], t[1], t[2], 0.5f); },
      [](int) {
        return Tolerance{1e-4, 1e-4};
      });
}

TEST(CudaKernelsTest, GatherAppend) {
  SKIP_WITHOUT_CUDA();
  const int64_t rows = 7, a = 3, t0 = 9, c = 16;
  Tensor ids = Tensor::FromInts({rows}, {4, -1, 0, 0, 5, 2, -1});
  ExpectSameOnCpuAndCuda(
      {RandomTensor({6, a, t0, c}, 1), ids, RandomTensor({rows, a, c}, 2),
       RandomTensor({rows, a, t0 - 2 + 3, c}, 3)},
      [](const std::vector<Tensor>& t) { GatherAppend(t[0], t[1], 2, t[2], t[3]); });
  ExpectSameOnCpuAndCuda(
      {RandomTensor({rows, a, t0, c}, 4), RandomTensor({rows, a, t0 + 4, c}, 5)},
      [](const std::vector<Tensor>& t) { GatherAppend(t[0], Tensor(), 0, Tensor(), t[1]); });
  ExpectSameOnCpuAndCuda(
      {RandomTensor({rows, a, c}, 6), RandomTensor({rows, a, 1, c}, 7)},
      [](const std::vector<Tensor>& t) { GatherAppend(Tensor(), Tensor(), 0, t[0], t[1]); });
  // A past of no rows and only new ids: T0 - skip places of zeros, then next, as on the CPU.
  ExpectSameOnCpuAndCuda(
      {Tensor::Zeros({0, a, t0, c}), Tensor::FromInts({2}, {-1, -1}), RandomTensor({2, a, c}, 8),
       RandomTensor({2, a, t0, c}, 9)},
      [](const std::vector<Tensor>& t) { GatherAppend(t[0], t[1], 2, t[2], t[3]); });
}

// A decoder step's attention shapes: one query a row (self-attention, one sentence with every key
// masked), a beam's queries over more keys than the kernel's warps take in one chunk, a sentence
// map into more sentences, odd head widths (the scalar loads), causal, and the widest heads.
TEST(CudaKernelsTest, AttendForEveryShapeADecoderGivesIt) {
  SKIP_WITHOUT_CUDA();
  auto attend = [](bool causal, float scale) {
    return [causal, scale](const std::vector<Tensor>& t) {
      Attend(t[0], t[1], t[2], t[3], t[4], causal, scale, t[5]);
    };
  };
  std::vector<float> keep(5 * 37, 1.f);
  for (int t = 0; t < 37; ++t) keep[2 * 37 + t] = 0.f;  // sentence 2: nothing to attend to
  for (int t = 30; t < 37; ++t) keep[t] = keep[4 * 37 + t - 20] = 0.f;
  ExpectSameOnCpuAndCuda({RandomTensor({5, 4, 1, 64}, 1, 3.f), RandomTensor({5, 4, 37, 64}, 2),
                          RandomTensor({5, 4, 37, 64}, 3), Tensor::FromVector({5, 37}, keep),
                          Tensor(), RandomTensor({5, 1, 4, 64}, 4)},
                         attend(false, 0.125f));
  ExpectSameOnCpuAndCuda(
      {RandomTensor({3, 2, 4, 24}, 5), RandomTensor({3, 2, 300, 24}, 6),
       RandomTensor({3, 2, 300, 24}, 7), Tensor(), Tensor(), RandomTensor({3, 4, 2, 24}, 8)},
      attend(false, 0.2f));
  std::vector<float> lengths(5 * 70);
  for (int i = 0; i < 5 * 70; ++i) lengths[i] = i % 70 < 70 - 9 * (i / 70) ? 1.f : 0.f;
  ExpectSameOnCpuAndCuda({RandomTensor({3, 2, 2, 20}, 9), RandomTensor({5, 2, 70, 20}, 10),
                          RandomTensor({5, 2, 70, 20}, 11), Tensor::FromVector({5, 70}, lengths),
                          Tensor::FromInts({3}, {4, 0, 2}), RandomTensor({3, 2, 2, 20}, 12)},
                         attend(false, 0.3f));
  ExpectSameOnCpuAndCuda(
      {RandomTensor({2, 3, 5, 7}, 13), RandomTensor({2, 3, 5, 7}, 14),
       RandomTensor({2, 3, 5, 7}, 15), Tensor(), Tensor(), RandomTensor({2, 5, 3, 7}, 16)},
      attend(true, 0.4f));
  ExpectSameOnCpuAndCuda({RandomTensor({2, 1, 1, kAttendMaxHeadWidth}, 17),
                          RandomTensor({2, 1, 9, kAttendMaxHeadWidth}, 18),
                          RandomTensor({2, 1, 9, kAttendMaxHeadWidth}, 19), Tensor(), Tensor(),
                          RandomTensor({2, 1, 1, kAttendMaxHeadWidth}, 20)},
                         attend(false, 0.0625f));
}

TEST(CudaKernelsTest, Permute0213) {
  SKIP_WITHOUT_CUDA();
  // d = 7 moves floats, d = 8 four at a time.
  for (int64_t d : {7, 8}) {
    for (bool accumulate : {false, true}) {
      ExpectSameOnCpuAndCuda(
          {RandomTensor({2, 3, 5, d}, 1), RandomTensor({2, 5, 3, d}, 2)},
          [&](const std::vector<Tensor>& t) { Permute0213(t[0], t[1], accumulate); });
    }
  }
}

TEST(CudaKernelsTest, DropoutEqualsTheCpus) {
  SKIP_WITHOUT_CUDA();
  for (bool accumulate : {false, true}) {
    ExpectSameOnCpuAndCuda(
        {RandomTensor({7, 1031}, 1), RandomTensor({7, 1031}, 2)},
        [&](const std::vector<Tensor>& t) {
          Dropout(t[0], t[1], 0.9f, 1234, accumulate ? t[1] : Tensor());
        },
        // Accumulated: a multiply-add the CPU's compiler may fuse (one rounding, not two).
        [&](int) {
          return accumulate ? Tolerance{1e-6, 1e-6} : Tolerance{0, 0};
        });
  }
}

TEST(CudaKernelsTest, DropoutMaskEqualsCpuBitForBit) {
  SKIP_WITHOUT_CUDA();
  for (float keep : {0.1f, 0.5f, 0.9f, 1.f}) {
    for (uint64_t seed : {0ull, 42ull, 0xdeadbeefcafeull}) {
      ExpectSameOnCpuAndCuda(
          {RandomTensor({1001, 3}, 1)},
          [&](const std::vector<Tensor>& t) { DropoutMask(t[0], keep, seed); },
          [](int) {
            return Tolerance{0, 0};
          });
    }
  }
}

TEST(CudaKernelsTest, SumSquares) {
  SKIP_WITHOUT_CUDA();
  for (int64_t n : {1, 1000, 1 << 20, 3'000'001}) {
    Tensor x = RandomTensor({n}, 1);
    const double cpu = SumSquares(x);
    const double cuda = SumSquares(To(x, Device::kCuda));
    EXPECT_NEAR(cuda, cpu, 1e-4 * cpu) << "n = " << n;
  }
}

TEST(CudaKernelsTest, OptimizerUpdatesEqualCpuBitForBit) {
  // Explicitly rounded intrinsics on the GPU: the same bits as the CPU loops, state included.
  SKIP_WITHOUT_CUDA();
  const auto exact = [](int) { return Tolerance{0, 0}; };
  for (int64_t n : {1, 1000, 300'001}) {
    const AdamArgs a{
        1e-3f, 0.9f, 0.98f, 1e-8f, 0.5f, 1e-5f, 1.f / (1.f - 0.9f), 1.f / (1.f - 0.98f)};
    Tensor v = RandomTensor({n}, 4, 0.1f);  // a second moment is never negative
    for (int64_t i = 0; i < n; ++i) v.f32()[i] = std::fabs(v.f32()[i]);
    ExpectSameOnCpuAndCuda(
        {RandomTensor({n}, 1), RandomTensor({n}, 2), RandomTensor({n}, 3, 0.1f), v},
        [&](const std::vector<Tensor>& t) {
          for (int step = 0; step < 3; ++step) AdamUpdate(t[0], t[1], t[2], t[3], a);
        },
        exact);
    for (const auto& [momentum, nesterov] :
         {std::pair{0.f, false}, std::pair{0.9f, false}, std::pair{0.9f, true}}) {
      const SgdArgs s{0.1f, momentum, 2.f, 1e-4f, nesterov};
      ExpectSameOnCpuAndCuda(
          {RandomTensor({n}, 5), RandomTensor({n}, 6), RandomTensor({n}, 7)},
          [&](const std::vector<Tensor>& t) {
            for (int step = 0; step < 3; ++step) SgdUpdate(t[0], t[1], t[2], s);
          },
          exact);
    }
  }
}

TEST(CudaKernelsDeathTest, BadIdIsReportedAtTheNextSync) {
  SKIP_WITHOUT_CUDA();
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // re-exec: a forked child cannot use CUDA
  EXPECT_DEATH(
      {
        Tensor table = To(RandomTensor({10, 4}, 1), Device::kCuda);
        Tensor ids = To(Tensor::FromInts({2}, {3, 10}), Device::kCuda);
        Tensor out = Tensor::Empty({2, 4}, DType::kFloat32, Device::kCuda);
        GatherRows(table, ids, out);
        out.ToVector();
      },
      // The emulated GPU runs the CPU's kernel when the host waits; it stops with its own message.
      GpuEmulated() ? "id 10 outside table of 10" : "GatherRows: id outside the table");
}

}  // namespace
}  // namespace tern
