#include "tensor/emulated_gpu.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "common/error.h"
#include "tensor/cpu/cpu_kernels.h"

namespace tern::emulated_gpu {
namespace {

// Bit 62 makes an x86-64 address non-canonical (a fault on any access, 4- or 5-level paging);
// bit 55 puts an AArch64 address in the kernel's half (bit 62 alone sits in the top byte, which
// AArch64 Linux ignores). Host allocations have neither.
constexpr uintptr_t kTag = (uintptr_t{1} << 62) | (uintptr_t{1} << 55);

bool Tagged(const void* p) { return (reinterpret_cast<uintptr_t>(p) & kTag) == kTag; }

void* Untag(const void* p, const char* user) {
  if (!Tagged(p)) {
    Fail(user, ": a CUDA tensor at ", p, " that the emulated GPU did not allocate (a host pointer ",
         "labelled Device::kCuda?)");
  }
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~kTag);
}

void CheckHost(const void* p, const char* user) {
  if (Tagged(p)) Fail(user, ": emulated GPU memory at ", p, " passed as host memory");
}

std::atomic<int64_t> synchronizations{0};

// Set while this thread runs the queue's operations.
thread_local bool running_queue = false;

// The device's queue (one stream per process, as the CUDA backend's). Kernels, copies on the
// device and asynchronous copies from the host wait in it until the host waits for them (a
// synchronize, a copy to or from the host, a fence), and only as far as the host waits. So a host
// buffer rewritten before the device has read it, or a kernel's failure, shows where it would on
// a GPU. Device memory freed while work is queued is freed in queue order.
class Queue {
 public:
  // A full queue runs its older half, as a GPU's launch queue blocks the host (no wait counted).
  static constexpr int64_t kMaxPending = 4096;

  void Push(std::function<void()> op) {
    int64_t pending;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      pending_.push_back(std::move(op));
      ++pushed_;
      pending = pushed_ - ran_;
    }
    // The queue's own work (a kernel freeing what it held) only queues: this thread runs it.
    if (pending > kMaxPending && !running_queue) RunTo(Mark() - kMaxPending / 2);
  }

  // The operations queued so far: a point for RunTo.
  int64_t Mark() {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    return pushed_;
  }

  // Runs, in order and on this thread, the operations queued before `mark` not yet run. An
  // operation's tern::Error reaches this caller, as a kernel's error reaches whoever waits for
  // it on a GPU; the operations after it stay queued.
  void RunTo(int64_t mark) {
    std::lock_guard<std::mutex> run(run_mutex_);  // one thread runs them at a time
    running_queue = true;
    struct Reset {
      ~Reset() { running_queue = false; }
    } reset;
    for (;;) {
      std::function<void()> op;
      {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        if (ran_ >= mark || pending_.empty()) return;
        op = std::move(pending_.front());
        pending_.pop_front();
        ++ran_;
      }
      op();
    }
  }

  void RunAll() { RunTo(std::numeric_limits<int64_t>::max()); }

 private:
  std::mutex run_mutex_;
  std::mutex queue_mutex_;
  std::deque<std::function<void()>> pending_;  // GUARDED_BY(queue_mutex_)
  int64_t pushed_ = 0;                         // GUARDED_BY(queue_mutex_)
  int64_t ran_ = 0;                            // GUARDED_BY(queue_mutex_)
};

Queue& TheQueue() {
  static Queue* queue = new Queue;  // never destroyed: tensors freed at exit still queue
  return *queue;
}

// The limit on what DeviceMemory holds at once: TERN_EMULATE_GPU_MEMORY_MIB, or none (0).
size_t MemoryLimitFromEnvironment() {
  const char* v = std::getenv("TERN_EMULATE_GPU_MEMORY_MIB");
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long long mib = std::strtoll(v, &end, 10);
  if (*end != '\0' || mib <= 0)
    Fail("TERN_EMULATE_GPU_MEMORY_MIB=", v, ": give the emulated GPU's memory in MiB (> 0)");
  return static_cast<size_t>(mib) << 20;
}

class DeviceMemory : public Allocator {
 public:
  // As a GPU's allocator: over the limit, one clear error and nothing allocated. Memory counts as
  // given back at the free, as a stream-ordered pool reuses it, even while queued work may use it.
  void* Allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (limit_ > 0 && bytes > limit_ - std::min(limit_, held_)) FailOutOfDeviceMemory(bytes, held_);
    void* p = AllocatorFor(Device::kCpu)->Allocate(bytes);
    CHECK(!Tagged(p)) << "the host allocator returned an address with the emulated GPU's tag bits";
    held_ += bytes;
    sizes_[p] = bytes;
    return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) | kTag);
  }
  // After the work queued before the free (which may still use the memory), as a GPU's
  // stream-ordered allocator reuses it. A kernel holding the last reference frees it when it has
  // run, which is before copies queued after it that read the same memory by address (the host
  // let go of the tensor after queueing them); so that free, too, waits at the queue's end.
  void Free(void* ptr) override {
    if (ptr == nullptr) return;
    void* host = Untag(ptr, "emulated GPU free");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = sizes_.find(host);
      CHECK(it != sizes_.end()) << "freeing emulated GPU memory it did not hand out";
      held_ -= it->second;
      sizes_.erase(it);
    }
    TheQueue().Push([host] { AllocatorFor(Device::kCpu)->Free(host); });
  }
  Device device() const override { return Device::kCuda; }

  void set_limit(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = bytes;
  }

 private:
  std::mutex mutex_;
  size_t limit_ = MemoryLimitFromEnvironment();  // GUARDED_BY(mutex_); 0: none
  size_t held_ = 0;                              // GUARDED_BY(mutex_)
  std::unordered_map<void*, size_t> sizes_;      // GUARDED_BY(mutex_): host address -> bytes
};

// A string as a template argument: the kernel's name in OnHost's messages.
template <size_t N>
struct KernelName {
  constexpr KernelName(const char (&s)[N]) { std::copy_n(s, N, text); }  // NOLINT: implicit
  char text[N];
};

// A kernel's argument as the queue keeps it: a tensor as its host view, with the tensor itself
// (which may own the memory) kept alive until the kernel has run; anything else by value.
struct HeldTensor {
  Tensor device, host;
};
HeldTensor Hold(const Tensor& t, const char* kernel) { return {t, HostView(t, kernel)}; }
template <typename T>
T Hold(const T& x, const char*) {
  return x;
}
const Tensor& Use(const HeldTensor& t) { return t.host; }
template <typename T>
const T& Use(const T& x) {
  return x;
}

// A CPU kernel on the emulated GPU: its tensor arguments are checked to be emulated device
// memory now (a failure names the kernel), and it runs on their host views when the host waits.
template <auto Kernel, KernelName kName>
struct OnHost;
template <typename... Args, void (*Kernel)(Args...), KernelName kName>
struct OnHost<Kernel, kName> {
  static void Run(Args... args) {
    TheQueue().Push([held = std::make_tuple(Hold(args, kName.text)...)] {
      std::apply([](const auto&... a) { Kernel(Use(a)...); }, held);
    });
  }
};

void Synchronize();

// SumSquares hands its result to the host: on a GPU, a wait.
void SumSquaresWaiting(const Tensor& x, double* out) {
  const Tensor host = HostView(x, "sum_squares");
  Synchronize();
  cpu::SumSquares(host, out);
}

#define TERN_ON_HOST(field, kernel) .field = &OnHost<&cpu::kernel, #field>::Run

// A whole GRU layer's host reference on the emulated GPU: the call's tensors as host views (the
// device ones kept alive until it has run), its host lengths copied now (the caller's may be gone
// by the time the queue runs).
struct HostGruCall {
  GruLayerCall call;
  std::vector<Tensor> held;
  std::shared_ptr<std::vector<int32_t>> lengths;
};

HostGruCall ToHost(const GruLayerCall& c, const char* kernel) {
  HostGruCall h{c, {}, nullptr};
  auto view = [&](const Tensor& t) {
    if (!t.defined()) return t;
    h.held.push_back(t);
    return HostView(t, kernel);
  };
  h.call.x = view(c.x);
  h.call.mask = view(c.mask);
  h.call.out = view(c.out);
  h.call.saved = Tensor();
  h.call.arena = nullptr;
  for (GruWeights& w : h.call.weights)
    for (Tensor* t : {&w.w, &w.wx, &w.u, &w.ux, &w.b, &w.bx}) *t = view(*t);
  if (c.lengths.defined()) {
    h.lengths = std::make_shared<std::vector<int32_t>>(c.lengths.i32(),
                                                       c.lengths.i32() + c.lengths.numel());
    h.call.lengths = Tensor(h.lengths->data(), c.lengths.shape(), DType::kInt32, Device::kCpu);
  }
  return h;
}

void GruLayerOnHost(GruLayerCall& call) {
  HostGruCall h = ToHost(call, "gru_layer");
  call.saved = Tensor();
  TheQueue().Push([h]() mutable { cpu::GruLayer(h.call); });
}

void GruLayerBackwardOnHost(const GruLayerCall& call, const GruLayerGrads& grads) {
  HostGruCall h = ToHost(call, "gru_layer_backward");
  GruLayerGrads g = grads;
  auto view = [&](const Tensor& t) {
    if (!t.defined()) return t;
    h.held.push_back(t);
    return HostView(t, "gru_layer_backward");
  };
  g.dout = view(grads.dout);
  g.dx = view(grads.dx);
  for (GruWeights& w : g.dweights)
    for (Tensor* t : {&w.w, &w.wx, &w.u, &w.ux, &w.b, &w.bx}) *t = view(*t);
  TheQueue().Push([h, g] { cpu::GruLayerBackward(h.call, g); });
}

DeviceMemory* TheDeviceMemory() {
  static DeviceMemory* memory = new DeviceMemory;  // never destroyed, as the real one
  return memory;
}

Allocator* DeviceAllocator() { return TheDeviceMemory(); }

Allocator* NoPinnedAllocator() { return nullptr; }  // page-locked memory: the CPU's
bool Available() { return true; }
int DeviceCount() { return 1; }
void SetDevice(int) {}
void* NoStream() { return nullptr; }

std::string BusId(int) { return "emulated:" + std::to_string(::getpid()); }

void Synchronize() {
  synchronizations.fetch_add(1, std::memory_order_relaxed);
  TheQueue().RunAll();
}

int64_t SynchronizeCount() { return synchronizations.load(std::memory_order_relaxed); }

void Copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  void* to = dst_device == Device::kCuda ? Untag(dst, "copy to the GPU") : dst;
  const void* from = src_device == Device::kCuda ? Untag(src, "copy from the GPU") : src;
  if (dst_device == Device::kCpu) CheckHost(dst, "copy to the host");
  if (src_device == Device::kCpu) CheckHost(src, "copy from the host");
  if (dst_device == Device::kCuda && src_device == Device::kCuda) {
    TheQueue().Push([=] { std::memcpy(to, from, bytes); });
    return;
  }
  // As on a GPU: the host side may be a temporary, so the host waits for the copy (and so for
  // everything queued before it).
  Synchronize();
  std::memcpy(to, from, bytes);
}

void CopyToDeviceAsync(void* dst, const void* src, size_t bytes) {
  CheckHost(src, "asynchronous copy from the host");
  void* to = Untag(dst, "asynchronous copy to the GPU");
  // The host bytes are read when the device gets there, not now.
  TheQueue().Push([=] { std::memcpy(to, src, bytes); });
}

void ZeroAsync(void* dst, size_t bytes) {
  void* to = Untag(dst, "zero-fill on the GPU");
  TheQueue().Push([=] { std::memset(to, 0, bytes); });
}

void* EventCreate() { return new int64_t(0); }
void EventRecord(void* event) { *static_cast<int64_t*>(event) = TheQueue().Mark(); }
void EventWait(void* event) { TheQueue().RunTo(*static_cast<int64_t*>(event)); }
void EventDestroy(void* event) { delete static_cast<int64_t*>(event); }

const KernelTable* Kernels() {
  static const KernelTable table = {
      TERN_ON_HOST(gemm, Gemm),
      TERN_ON_HOST(gemm_bias, GemmBias),
      TERN_ON_HOST(batched_gemm, BatchedGemm),
      TERN_ON_HOST(fill, Fill),
      TERN_ON_HOST(copy, Copy),
      TERN_ON_HOST(add, Add),
      TERN_ON_HOST(mul, Mul),
      TERN_ON_HOST(add_bias, AddBias),
      TERN_ON_HOST(divide_rows, DivideRows),
      TERN_ON_HOST(sum_rows, SumRows),
      TERN_ON_HOST(unary, Unary),
      TERN_ON_HOST(unary_backward, UnaryBackward),
      TERN_ON_HOST(softmax, Softmax),
      TERN_ON_HOST(softmax_backward, SoftmaxBackward),
      TERN_ON_HOST(log_softmax, LogSoftmax),
      TERN_ON_HOST(layer_norm, LayerNorm),
      TERN_ON_HOST(layer_norm_backward, LayerNormBackward),
      TERN_ON_HOST(cross_entropy, CrossEntropy),
      TERN_ON_HOST(cross_entropy_backward, CrossEntropyBackward),
      TERN_ON_HOST(gather_rows, GatherRows),
      TERN_ON_HOST(scatter_add_rows, ScatterAddRows),
      TERN_ON_HOST(permute_0213, Permute0213),
      TERN_ON_HOST(dropout_mask, DropoutMask),
      TERN_ON_HOST(dropout, Dropout),
      .sum_squares = &SumSquaresWaiting,
      TERN_ON_HOST(sum_squares_to, SumSquaresTo),
      TERN_ON_HOST(clip_to_norm, ClipToNorm),
      TERN_ON_HOST(adam_update, AdamUpdate),
      TERN_ON_HOST(sgd_update, SgdUpdate),
      TERN_ON_HOST(loss_scale_gate, LossScaleGate),
      TERN_ON_HOST(step_gate, StepGate),
      TERN_ON_HOST(scale_by, ScaleBy),
      TERN_ON_HOST(gather_append, GatherAppend),
      TERN_ON_HOST(attend, Attend),
      TERN_ON_HOST(round_operand, RoundOperand),
      .round_operand_sum_rows = nullptr,  // as the CUDA table: RoundOperand, then SumRows
      TERN_ON_HOST(clamp, Clamp),
      TERN_ON_HOST(gru_cell, GruCell),
      TERN_ON_HOST(gru_cell_backward, GruCellBackward),
      TERN_ON_HOST(additive_attention_scores, AdditiveAttentionScores),
      TERN_ON_HOST(additive_attention_scores_backward, AdditiveAttentionScoresBackward),
      .gru_layer = &GruLayerOnHost,
      .gru_layer_backward = &GruLayerBackwardOnHost,
  };
  return &table;
}

}  // namespace

void SetMemoryLimit(size_t bytes) { TheDeviceMemory()->set_limit(bytes); }

bool Enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("TERN_EMULATE_GPU");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return enabled;
}

const GpuBackend& Backend() {
  static const GpuBackend backend = {
      .device_allocator = &DeviceAllocator,
      .pinned_allocator = &NoPinnedAllocator,
      .device_available = &Available,
      .device_count = &DeviceCount,
      .set_device = &SetDevice,
      .bus_id = &BusId,
      .kernel_stream = &NoStream,
      .synchronize_count = &SynchronizeCount,
      .copy = &Copy,
      .copy_to_device_async = &CopyToDeviceAsync,
      .zero_async = &ZeroAsync,
      .event_create = &EventCreate,
      .event_record = &EventRecord,
      .event_wait = &EventWait,
      .event_destroy = &EventDestroy,
      .kernels = &Kernels,
  };
  return backend;
}

Tensor HostView(const Tensor& t, const char* user) {
  if (!t.defined()) return t;
  if (t.device() != Device::kCuda) {
    Fail(user, ": given a host tensor ", t.shape().ToString(), " on the emulated GPU (",
         "every tensor of a GPU kernel must be on the GPU)");
  }
  return Tensor(Untag(t.raw(), user), t.shape(), t.dtype(), Device::kCpu);
}

void Enqueue(const std::vector<Tensor>& tensors, std::function<void(const std::vector<Tensor>&)> op,
             const char* user) {
  std::vector<Tensor> views;
  for (const Tensor& t : tensors) views.push_back(HostView(t, user));
  TheQueue().Push([tensors, views = std::move(views), op = std::move(op)] { op(views); });
}

}  // namespace tern::emulated_gpu
