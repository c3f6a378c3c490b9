// The GPU side of fused_top_k.h in a build without CUDA: every entry point says so.
#include "common/error.h"
#include "inference/search/fused_top_k.h"

namespace tern::inference::gpu_impl {
namespace {
[[noreturn]] void NoCuda() {
  throw Error("the fused top-k on a GPU needs a CUDA build (cmake -DTERN_CUDA=ON)");
}
}  // namespace

int Splits(int64_t, int64_t) { NoCuda(); }
void FusedTopK(const float*, int64_t, int64_t, const float*, int32_t, int32_t, int, bool, int,
               float*, int32_t*, float*, float*, float*, int32_t*, float*) {
  NoCuda();
}
void Synchronize() { NoCuda(); }

}  // namespace tern::inference::gpu_impl
