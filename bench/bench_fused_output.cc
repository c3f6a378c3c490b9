// bench-fused-output: the fused output pass (bias + softmax + top-k in one sweep, Hoang et al.)
// against the unfused sequence (bias added in place, log-softmax written in full, then top-k over
// it), same run, same rows, at beams 1, 4 and 8 (k = beam; beam 1 is the argmax, no softmax) and
// vocabularies of 8k, 32k and 64k, for a batch of one sentence and of 64. Prints one JSON line per
// shape with microseconds per call and the fused pass's speed-up. --device cuda (the default)
// needs a visible GPU and prints one "skipped" line without one; --device cpu runs the same on one
// core.
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "inference/search/fused_top_k.h"
#include "tensor/allocator.h"
#include "tensor/ops.h"
#include "tensor/threads.h"

DEFINE_string(device, "cuda", "cuda or cpu");
DEFINE_string(vocabs, "8000,32000,64000", "vocabulary sizes");
DEFINE_string(beams, "1,4,8", "beam sizes (k of the top-k)");
DEFINE_string(batches, "1,64", "sentences per batch (rows = sentences x beam)");
DEFINE_double(seconds, 0.3, "time per measurement");

namespace tern::inference {
namespace {

std::vector<int64_t> Numbers(const std::string& list, const char* flag) {
  std::vector<int64_t> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoll(item, &used));
      if (used != item.size() || out.back() < 1) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error(std::string(flag) + ": '" + item + "' is not a positive number");
    }
  }
  return out;
}

// Mean microseconds per call of f, after warm-up, over at least FLAGS_seconds.
template <class F>
double MicrosPerCall(Device device, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  WaitForDevice(device);
  using Clock = std::chrono::steady_clock;
  int64_t calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < FLAGS_seconds) {
    for (int i = 0; i < 10; ++i) f();
    calls += 10;
    WaitForDevice(device);
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return elapsed * 1e6 / calls;
}

Tensor RandomOn(const Shape& shape, Device device, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 3.f);
  Tensor host = Tensor::Empty(shape);
  for (int64_t i = 0; i < host.numel(); ++i) host.f32()[i] = normal(rng);
  Tensor out = Tensor::Empty(shape, DType::kFloat32, device);
  Copy(host, out);
  return out;
}

void Measure(Device device, int64_t vocab, int beam, int batch) {
  const int64_t rows = static_cast<int64_t>(beam) * batch;
  Tensor logits = RandomOn({rows, vocab}, device, 1), bias = RandomOn({vocab}, device, 2);
  Tensor log_probs = Tensor::Empty({rows, vocab}, DType::kFloat32, device);
  Tensor values = Tensor::Empty({rows, beam}, DType::kFloat32, device);
  Tensor columns = Tensor::Empty({rows, beam}, DType::kInt32, device);
  Tensor lse = Tensor::Empty({rows}, DType::kFloat32, device);
  const int32_t excluded[2] = {0, 2};  // pad and bos
  const bool normalize = beam > 1;
  const double fused = MicrosPerCall(
      device, [&] { FusedTopK(logits, bias, beam, normalize, excluded, values, columns, lse); });
  const double unfused = MicrosPerCall(
      device, [&] { UnfusedTopK(logits, bias, beam, excluded, log_probs, values, columns); });
  // Bytes the fused pass must read (logits and bias), at the time it took: its memory rate.
  const double gbps = (rows * vocab + vocab) * 4.0 / (fused * 1e-6) / 1e9;
  std::printf(
      "{\"bench\":\"fused_output\",\"device\":\"%s\",\"vocab\":%lld,\"beam\":%d,\"batch\":%d,"
      "\"rows\":%lld,\"fused_us\":%.2f,\"unfused_us\":%.2f,\"speedup\":%.3f,"
      "\"fused_read_gbps\":%.1f}\n",
      DeviceName(device), static_cast<long long>(vocab), beam, batch, static_cast<long long>(rows),
      fused, unfused, unfused / fused, gbps);
  std::fflush(stdout);
}

int Main() {
  Device device;
  if (FLAGS_device == "cuda") {
    if (!CudaAvailable()) {
      std::printf("{\"bench\":\"fused_output\",\"skipped\":\"no CUDA GPU visible\"}\n");
      return 0;
    }
    device = Device::kCuda;
  } else if (FLAGS_device == "cpu") {
    device = Device::kCpu;
  } else {
    throw Error("--device: '" + FLAGS_device + "' is not cuda or cpu");
  }
  for (int64_t vocab : Numbers(FLAGS_vocabs, "--vocabs")) {
    for (int64_t beam : Numbers(FLAGS_beams, "--beams")) {
      for (int64_t batch : Numbers(FLAGS_batches, "--batches")) {
        Measure(device, vocab, static_cast<int>(beam), static_cast<int>(batch));
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace tern::inference

int main(int argc, char** argv) {
  tern::UseTheCpusBlasKernels(argv);  // first: it may run the program again
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    return tern::inference::Main();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench-fused-output: %s\n", e.what());
    return 1;
  }
}
