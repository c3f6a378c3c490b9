// bench-gemm: the integer GEMM (tensor/cpu/int_gemm.h) against the BLAS's float32 GEMM, at the
// decoder's shapes, on one thread. One JSON line per (m, k, n, weight type) with both GFLOP/s and
// the speedup; float and integer runs alternate within a measurement so drifting machine load hits
// both alike, and each keeps its best of --rounds. The integer time includes quantizing A and the
// fused bias; the float time is sgemm alone.
//
//   bench-gemm [--m=1,2,4,8,16,32,64] [--shapes=256x256,512x512,...] [--types=int16,int8]
//   TERN_ISA=avx2 bench-gemm ...   # time one kernel
#include <cblas.h>
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "tensor/cpu/int_gemm.h"
#include "tensor/threads.h"

DEFINE_string(m, "1,2,4,8,16,32,64", "rows of A (the decoder's batch x beam)");
DEFINE_string(shapes, "256x256,512x512,512x2048,2048x512,1024x1024,1024x4096,4096x1024",
              "KxN weight shapes");
DEFINE_string(types, "int16,int8", "integer weight types");
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

// Seconds per call of fn, the best of one round of calls lasting at least --min_seconds.
template <typename Fn>
double TimeRound(Fn&& fn) {
  using Clock = std::chrono::steady_clock;
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < FLAGS_min_seconds);
  return elapsed / calls;
}

int BenchMain() {
  SetComputeThreads(1);
  std::vector<cpu::IntType> types;
  for (const std::string& t : Split(FLAGS_types, ',')) {
    if (t == "int16") {
      types.push_back(cpu::IntType::kInt16);
    } else if (t == "int8") {
      types.push_back(cpu::IntType::kInt8);
    } else {
      Fail("--types: '", t, "' is not int16 or int8");
    }
  }
  const char* isa = cpu::IntGemmIsaName(cpu::ActiveIntGemmIsa());
  const std::string blas = BlasCoreName();  // OpenBLAS's kernels for the float32 products
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (const std::string& shape : Split(FLAGS_shapes, ',')) {
    const auto kn = Split(shape, 'x');
    if (kn.size() != 2) Fail("--shapes: '", shape, "' is not KxN");
    const int64_t k = ParsePositive(kn[0], "shapes"), n = ParsePositive(kn[1], "shapes");
    std::vector<float> w(k * n), bias(n);
    for (float& x : w) x = 0.05f * dist(rng);
    for (float& x : bias) x = dist(rng);
    for (const std::string& m_text : Split(FLAGS_m, ',')) {
      const int64_t m = ParsePositive(m_text, "m");
      std::vector<float> a(m * k), c(m * n);
      for (float& x : a) x = dist(rng);
      auto float_gemm = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m),
                    static_cast<int>(n), static_cast<int>(k), 1.f, a.data(), static_cast<int>(k),
                    w.data(), static_cast<int>(n), 0.f, c.data(), static_cast<int>(n));
      };
      for (cpu::IntType type : types) {
        auto packed = cpu::PackedIntMatrix::FromFloat(type, w.data(), k, n, false);
        auto int_gemm = [&] { cpu::IntGemm(a.data(), m, *packed, bias.data(), c.data(), n); };
        float_gemm();
        int_gemm();
        double best_float = 1e30, best_int = 1e30;
        for (int r = 0; r < FLAGS_rounds; ++r) {
          best_float = std::min(best_float, TimeRound(float_gemm));
          best_int = std::min(best_int, TimeRound(int_gemm));
        }
        const double flops = 2.0 * m * k * n;
        std::printf(
            "{\"bench\":\"gemm\",\"m\":%lld,\"k\":%lld,\"n\":%lld,\"weights\":\"%s\",\"isa\":\"%"
            "s\","
            "\"blas\":\"%s\",\"threads\":1,\"gflops\":%.3f,\"float32_gflops\":%.3f,\"speedup\":%."
            "3f}\n",
            static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
            cpu::IntTypeName(type), isa, blas.c_str(), flops / best_int * 1e-9,
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
