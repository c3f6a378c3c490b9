// NCCL implementation of the float32 collectives. Each call queues on the tensor kernels' stream
// of the calling thread and returns without waiting: it runs after the kernels that wrote its
// input and before those queued after it, and a copy to the host (which waits for that stream)
// sees its result. So a GPU's sync SGD step never waits for its collectives, where the MPI
// communicator blocks. Uneven ranges (shards differ by the alignment remainder) use grouped
// ncclReduce/ncclBroadcast, one per owner.
#include "comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "common/error.h"
#include "tensor/allocator.h"

namespace tern::comm {
namespace {

void CheckCuda(cudaError_t code, const char* what) {
  if (code != cudaSuccess) Fail(what, " failed: ", cudaGetErrorString(code));
}

void CheckNccl(ncclResult_t code, const char* what) {
  if (code != ncclSuccess) {
    Fail(what, " failed: ", ncclGetErrorString(code), " (did a rank die? see the ranks' logs)");
  }
}

void CheckCudaFloat(const Tensor& t) {
  CHECK(t.defined() && t.dtype() == DType::kFloat32 && t.device() == Device::kCuda)
      << "NCCL collectives take CUDA float32 tensors";
}

bool AllEqual(const std::vector<int64_t>& counts) {
  for (int64_t c : counts) {
    if (c != counts[0]) return false;
  }
  return true;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator* host, int device) : host_(host), device_(device) {
    CheckCuda(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    if (host_->rank() == 0) CheckNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    host_->Broadcast(&id, sizeof(id), 0);
    CheckNccl(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "ncclCommInitRank");
  }

  ~NcclCommunicator() override {
    cudaDeviceSynchronize();  // nothing queued may still use the communicator
    ncclCommDestroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const char* name() const override { return "nccl"; }

  void Send(int peer, int tag, const void* data, size_t bytes) override {
    host_->Send(peer, tag, data, bytes);
  }
  int Recv(int peer, int tag, std::string* bytes) override { return host_->Recv(peer, tag, bytes); }
  bool TryRecv(int peer, int tag, std::string* bytes, int* source) override {
    return host_->TryRecv(peer, tag, bytes, source);
  }
  void Barrier() override { host_->Barrier(); }
  void Broadcast(void* data, size_t bytes, int root) override {
    host_->Broadcast(data, bytes, root);
  }

  void AllReduceSum(const Tensor& data) override {
    CheckCudaFloat(data);
    CheckNccl(
        ncclAllReduce(data.f32(), data.f32(), data.numel(), ncclFloat, ncclSum, comm_, Stream()),
        "ncclAllReduce");
  }

  void ReduceScatterSum(const Tensor& in, const std::vector<int64_t>& counts,
                        const Tensor& out) override {
    CheckCudaFloat(in);
    CheckCudaFloat(out);
    const std::vector<int64_t> offsets = CheckCounts(counts, in.numel(), out.numel());
    if (AllEqual(counts)) {
      CheckNccl(
          ncclReduceScatter(in.f32(), out.f32(), counts[0], ncclFloat, ncclSum, comm_, Stream()),
          "ncclReduceScatter");
    } else {
      CheckNccl(ncclGroupStart(), "ncclGroupStart");
      for (int root = 0; root < size(); ++root) {
        // recvbuff is written on the root only.
        CheckNccl(ncclReduce(in.f32() + offsets[root], out.f32(), counts[root], ncclFloat, ncclSum,
                             root, comm_, Stream()),
                  "ncclReduce");
      }
      CheckNccl(ncclGroupEnd(), "ncclGroupEnd");
    }
  }

  void AllGather(const Tensor& in, const std::vector<int64_t>& counts, const Tensor& out) override {
    CheckCudaFloat(in);
    CheckCudaFloat(out);
    const std::vector<int64_t> offsets = CheckCounts(counts, out.numel(), in.numel());
    if (AllEqual(counts)) {
      CheckNccl(ncclAllGather(in.f32(), out.f32(), counts[0], ncclFloat, comm_, Stream()),
                "ncclAllGather");
    } else {
      CheckNccl(ncclGroupStart(), "ncclGroupStart");
      for (int root = 0; root < size(); ++root) {
        CheckNccl(ncclBroadcast(in.f32(), out.f32() + offsets[root], counts[root], ncclFloat, root,
                                comm_, Stream()),
                  "ncclBroadcast");
      }
      CheckNccl(ncclGroupEnd(), "ncclGroupEnd");
    }
  }

 private:
  static cudaStream_t Stream() { return static_cast<cudaStream_t>(CudaKernelStream()); }

  std::vector<int64_t> CheckCounts(const std::vector<int64_t>& counts, int64_t total,
                                   int64_t mine) const {
    CHECK_EQ(static_cast<int>(counts.size()), size());
    std::vector<int64_t> offsets = Offsets(counts);
    CHECK_EQ(offsets.back(), total);
    CHECK_EQ(counts[rank()], mine);
    return offsets;
  }

  Communicator* host_;
  int device_;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool NcclAvailable() { return !GpuEmulated(); }  // the emulated GPU has no NCCL

std::unique_ptr<Communicator> MakeNcclCommunicator(Communicator* host, int cuda_device) {
  CHECK(host != nullptr);
  return std::make_unique<NcclCommunicator>(host, cuda_device);
}

}  // namespace tern::comm
