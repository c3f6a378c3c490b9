// bench-gemm: the integer GEMM (tensor/cpu/int_gemm.h) and the packed float GEMM
// (tensor/cpu/float_gemm.h) against the BLAS's float32 GEMM, at the decoder's shapes, on one
// thread. One JSON line per (m, k, n, weight type) with both GFLOP/s and the speedup; BLAS and
// Tern runs alternate within a measurement so drifting machine load hits both alike, and each
// keeps its best of --rounds, in this thread's CPU seconds. Tern's time includes quantizing A
// (integer types) and the fused bias; the BLAS time is sgemm alone. A shape KxNt stores W
// transposed, (N, K), as the output layer's embedding, and sgemm then multiplies by its transpose.
//
//   bench-gemm [--m=1,2,4,8,16,32,64] [--shapes=256x256,512x512,256x8000t,...]
//              [--types=int16,int8,float32]
//   TERN_ISA=avx2 bench-gemm ...   # time one kernel
#include <cblas.h>
#include <gflags/gflags.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tensor/cpu/float_gemm.h"
#include "tensor/cpu/int_gemm.h"
#include "tensor/threads.h"

DEFINE_string(m, "1,2,4,8,16,32,64", "rows of A (the decoder's batch x beam)");
DEFINE_string(shapes, "256x256,512x512,512x2048,2048x512,1024x1024,1024x4096,4096x1024",
              "KxN weight shapes");
DEFINE_string(types, "int16,int8", "Tern's weight types: int16, int8, float32 (packed)");
DEFINE_int32(rounds, 5, "alternating float/integer rounds; the best of each counts");
DEFINE_double(min_seconds, 0.01, "minimum time of one timed round");

namespace tern {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int64_t ParsePositive(const std::string& s, const char* flag) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v <= 0)
    Fail("--", flag, ": '", s, "' is not a positive integer");
  return v;
}

// This thread's CPU seconds: on a shared machine, wall time mostly measures the neighbours.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU seconds per call of fn, over one round of calls lasting at least --min_seconds.
template <typename Fn>
double TimeRound(Fn&& fn) {
  int64_t calls = 0;
  const double start = ThreadSeconds();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = ThreadSeconds() - start;
  } while (elapsed < FLAGS_min_seconds);
  return elapsed / calls;
}

int BenchMain() {
  SetComputeThreads(1);
  const std::vector<std::string> types = Split(FLAGS_types, ',');
  for (const std::string& t : types) {
    if (t != "int16" && t != "int8" && t != "float32") {
      Fail("--types: '", t, "' is not int16, int8 or float32");
    }
    if (t == "float32" && !cpu::HasFloatGemmKernel()) Fail("no float GEMM kernel on this CPU");
  }
  const char* isa = cpu::IntGemmIsaName(cpu::ActiveIntGemmIsa());
  const std::string blas = BlasCoreName();  // OpenBLAS's kernels for the float32 products
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (const std::string& shape : Split(FLAGS_shapes, ',')) {
    auto kn = Split(shape, 'x');
    if (kn.size() != 2) Fail("--shapes: '", shape, "' is not KxN or KxNt");
    const bool transposed = kn[1].back() == 't';
    if (transposed) kn[1].pop_back();
    const int64_t k = ParsePositive(kn[0], "shapes"), n = ParsePositive(kn[1], "shapes");
    std::vector<float> w(k * n), bias(n);
    for (float& x : w) x = 0.05f * dist(rng);
    for (float& x : bias) x = dist(rng);
    for (const std::string& m_text : Split(FLAGS_m, ',')) {
      const int64_t m = ParsePositive(m_text, "m");
      std::vector<float> a(m * k), c(m * n);
      for (float& x : a) x = dist(rng);
      auto float_gemm = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasTrans : CblasNoTrans,
                    static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.f, a.data(),
                    static_cast<int>(k), w.data(), static_cast<int>(transposed ? k : n), 0.f,
                    c.data(), static_cast<int>(n));
      };
      for (const std::string& type : types) {
        std::unique_ptr<cpu::PackedIntMatrix> packed;
        std::unique_ptr<cpu::PackedFloatMatrix> packed_float;
        cpu::FloatEpilogue epilogue;
        epilogue.bias = bias.data();
        if (type == "float32") {
          packed_float = std::make_unique<cpu::PackedFloatMatrix>(w.data(), k, n, transposed);
        } else {
          packed = cpu::PackedIntMatrix::FromFloat(
              type == "int16" ? cpu::IntType::kInt16 : cpu::IntType::kInt8, w.data(), k, n,
              transposed);
        }
        auto int_gemm = [&] {
          if (packed_float) {
            cpu::FloatGemm(a.data(), m, k, *packed_float, epilogue, c.data(), n);
          } else {
            cpu::IntGemm(a.data(), m, *packed, bias.data(), c.data(), n);
          }
        };
        float_gemm();
        int_gemm();
        double best_float = 1e30, best_int = 1e30;
        for (int r = 0; r < FLAGS_rounds; ++r) {
          best_float = std::min(best_float, TimeRound(float_gemm));
          best_int = std::min(best_int, TimeRound(int_gemm));
        }
        const double flops = 2.0 * m * k * n;
        std::printf(
            "{\"bench\":\"gemm\",\"m\":%lld,\"k\":%lld,\"n\":%lld,\"transposed\":%s,"
            "\"weights\":\"%s\",\"isa\":\"%s\","
            "\"blas\":\"%s\",\"threads\":1,\"gflops\":%.3f,\"float32_gflops\":%.3f,\"speedup\":%."
            "3f}\n",
            static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
            transposed ? "true" : "false", type.c_str(), isa, blas.c_str(), flops / best_int * 1e-9,
            flops / best_float * 1e-9, best_float / best_int);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace tern

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::SetUsageMessage("int16/int8 GEMM vs float32 sgemm, one JSON line per measurement");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return tern::RunMain("bench-gemm", [] { return tern::BenchMain(); });
}
