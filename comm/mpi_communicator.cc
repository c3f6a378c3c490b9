// Open MPI implementation of the Communicator. Variable-size receives use matched probes
// (MPI_Improbe/MPI_Mrecv), which stay correct when several threads receive at once.
#include "comm/mpi_communicator.h"

#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <mutex>

#include "comm/backoff.h"
#include "common/error.h"

namespace tern::comm {
namespace {

std::mutex g_init_mu;
int g_live_communicators = 0;   // GUARDED_BY(g_init_mu)
bool g_we_initialized = false;  // GUARDED_BY(g_init_mu)

void CheckMpi(int code, const char* what, int peer = -1) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  if (peer >= 0) {
    Fail(what, " with rank ", peer, " failed: ", std::string(text, len),
         " (did that rank die? see its log)");
  }
  Fail(what, " failed: ", std::string(text, len), " (did a rank die? see the ranks' logs)");
}

int ToInt(int64_t n, const char* what) {
  CHECK(n >= 0 && n <= INT_MAX) << what << ": " << n << " elements exceeds MPI's int count";
  return static_cast<int>(n);
}

void CheckCpuFloat(const Tensor& t) {
  CHECK(t.defined() && t.dtype() == DType::kFloat32 && t.device() == Device::kCpu)
      << "MPI collectives take CPU float32 tensors (use the NCCL communicator for CUDA)";
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, bool thread_multiple)
      : comm_(comm), thread_multiple_(thread_multiple) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  ~MpiCommunicator() override {
    MPI_Comm_free(&comm_);
    std::lock_guard<std::mutex> lock(g_init_mu);
    if (--g_live_communicators == 0 && g_we_initialized) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  // Blocking calls poll nonblocking ones, waiting between polls as Backoff says.
  void Send(int peer, int tag, const void* data, size_t bytes) override {
    CheckPeerAndTag(peer, tag, false);
    const int count = ToInt(static_cast<int64_t>(bytes), "Send");
    MPI_Request request;
    {
      auto lock = SerialLock();
      CheckMpi(MPI_Isend(data, count, MPI_BYTE, peer, tag, comm_, &request), "MPI_Isend", peer);
    }
    Backoff backoff;
    for (int done = 0;;) {
      {
        auto lock = SerialLock();
        CheckMpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", peer);
      }
      if (done) return;
      backoff.Wait();
    }
  }

  int Recv(int peer, int tag, std::string* bytes) override {
    CheckPeerAndTag(peer, tag, true);
    int source = -1;
    Backoff backoff;
    while (!TryRecv(peer, tag, bytes, &source)) backoff.Wait();
    return source;
  }

  bool TryRecv(int peer, int tag, std::string* bytes, int* source) override {
    CheckPeerAndTag(peer, tag, true);
    auto lock = SerialLock();
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    CheckMpi(MPI_Improbe(peer == kAnySource ? MPI_ANY_SOURCE : peer, tag, comm_, &found, &message,
                         &status),
             "MPI_Improbe", peer);
    if (!found) return false;
    const int s = Receive(&message, &status, bytes);
    if (source != nullptr) *source = s;
    return true;
  }

  void RecvInto(int peer, int tag, void* data, size_t bytes) override {
    CheckPeerAndTag(peer, tag, false);
    Backoff backoff;
    for (;;) {
      {
        auto lock = SerialLock();
        int found = 0;
        MPI_Message message;
        MPI_Status status;
        CheckMpi(MPI_Improbe(peer, tag, comm_, &found, &message, &status), "MPI_Improbe", peer);
        if (found) {
          int count = 0;
          MPI_Get_count(&status, MPI_BYTE, &count);
          CHECK_EQ(static_cast<size_t>(count), bytes) << "message from rank " << peer;
          CheckMpi(MPI_Mrecv(data, count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv",
                   peer);
          return;
        }
      }
      backoff.Wait();
    }
  }

  void Barrier() override {
    auto lock = CollectiveLock();
    CheckMpi(MPI_Barrier(comm_), "MPI_Barrier");
  }

  void AllReduceSum(const Tensor& data) override {
    CheckCpuFloat(data);
    auto lock = CollectiveLock();
    // Chunks keep counts within MPI's int.
    constexpr int64_t kChunk = int64_t{1} << 30;
    for (int64_t begin = 0; begin < data.numel(); begin += kChunk) {
      const int n = static_cast<int>(std::min(kChunk, data.numel() - begin));
      CheckMpi(MPI_Allreduce(MPI_IN_PLACE, data.f32() + begin, n, MPI_FLOAT, MPI_SUM, comm_),
               "MPI_Allreduce");
    }
  }

  void ReduceScatterSum(const Tensor& in, const std::vector<int64_t>& counts,
                        const Tensor& out) override {
    CheckCpuFloat(in);
    CheckCpuFloat(out);
    std::vector<int> recv_counts = IntCounts(counts, in.numel(), out.numel());
    auto lock = CollectiveLock();
    CheckMpi(MPI_Reduce_scatter(in.f32(), out.f32(), recv_counts.data(), MPI_FLOAT, MPI_SUM, comm_),
             "MPI_Reduce_scatter");
  }

  void AllGather(const Tensor& in, const std::vector<int64_t>& counts, const Tensor& out) override {
    CheckCpuFloat(in);
    CheckCpuFloat(out);
    std::vector<int> recv_counts = IntCounts(counts, out.numel(), in.numel());
    std::vector<int> displs(size_, 0);
    for (int r = 1; r < size_; ++r) displs[r] = displs[r - 1] + recv_counts[r - 1];
    auto lock = CollectiveLock();
    CheckMpi(MPI_Allgatherv(in.f32(), recv_counts[rank_], MPI_FLOAT, out.f32(), recv_counts.data(),
                            displs.data(), MPI_FLOAT, comm_),
             "MPI_Allgatherv");
  }

  void Broadcast(void* data, size_t bytes, int root) override {
    CHECK(root >= 0 && root < size_);
    auto lock = CollectiveLock();
    CheckMpi(
        MPI_Bcast(data, ToInt(static_cast<int64_t>(bytes), "Broadcast"), MPI_BYTE, root, comm_),
        "MPI_Bcast");
  }

 private:
  int Receive(MPI_Message* message, MPI_Status* status, std::string* bytes) {
    int count = 0;
    MPI_Get_count(status, MPI_BYTE, &count);
    bytes->resize(count);
    CheckMpi(MPI_Mrecv(bytes->data(), count, MPI_BYTE, message, MPI_STATUS_IGNORE), "MPI_Mrecv",
             status->MPI_SOURCE);
    return status->MPI_SOURCE;
  }

  std::unique_lock<std::mutex> SerialLock() { return CollectiveLock(); }
  std::unique_lock<std::mutex> CollectiveLock() {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!thread_multiple_) lock.lock();
    return lock;
  }

  std::vector<int> IntCounts(const std::vector<int64_t>& counts, int64_t total,
                             int64_t mine) const {
    CHECK_EQ(static_cast<int>(counts.size()), size_);
    CHECK_EQ(Offsets(counts).back(), total);
    CHECK_EQ(counts[rank_], mine);
    std::vector<int> out(size_);
    for (int r = 0; r < size_; ++r) out[r] = ToInt(counts[r], "collective");
    return out;
  }

  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  const bool thread_multiple_;
  // Serializes MPI calls when the library is not thread-multiple; unused otherwise.
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<Communicator> MakeMpiCommunicator(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (!initialized) {
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      Fail("MPI_Init_thread failed; is Open MPI installed and the program started by mpirun?");
    }
    g_we_initialized = true;
  } else {
    MPI_Query_thread(&provided);
  }
  const bool multiple = provided >= MPI_THREAD_MULTIPLE;
  if (!multiple) {
    LOG(WARNING) << "MPI provides thread level " << provided
                 << " < MPI_THREAD_MULTIPLE; serializing MPI calls (slower)";
  }
  MPI_Comm comm;
  CheckMpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  ++g_live_communicators;
  return std::make_unique<MpiCommunicator>(comm, multiple);
}

bool LaunchedByMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

}  // namespace tern::comm
