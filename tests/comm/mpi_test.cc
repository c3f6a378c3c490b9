// The MPI communicator under `mpirun -np 2` (registered in CMake): the shared checks, plus
// several threads sending and receiving at once (MPI_THREAD_MULTIPLE).
#include <thread>

#include "comm/mpi_communicator.h"
#include "tests/comm/collective_checks.h"

namespace tern::comm {
namespace {

Communicator* g_comm = nullptr;

TEST(MpiTest, PointToPoint) { testing::CheckPointToPoint(*g_comm); }

TEST(MpiTest, Collectives) { testing::CheckCollectives(*g_comm); }

TEST(MpiTest, ThreadsSendAndReceiveConcurrently) {
  Communicator& comm = *g_comm;
  const int peer = (comm.rank() + 1) % comm.size();
  constexpr int kMessages = 100;
  std::thread receiver([&] {
    std::string bytes;
    for (int i = 0; i < kMessages; ++i) {
      comm.Recv(kAnySource, 9, &bytes);
      EXPECT_EQ(bytes.size(), 100000u);  // past the eager limit: rendezvous protocol
    }
  });
  std::thread sender([&] {
    const std::string payload(100000, 'x');
    for (int i = 0; i < kMessages; ++i) comm.Send(peer, 9, payload);
  });
  sender.join();
  receiver.join();
  comm.Barrier();
}

}  // namespace
}  // namespace tern::comm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = tern::comm::MakeMpiCommunicator(&argc, &argv);
  tern::comm::g_comm = comm.get();
  // Only rank 0 prints results; every rank runs every test.
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  int rc_all = rc;
  // Fail on every rank if any failed, so mpirun's exit status says so.
  float flag = rc != 0 ? 1.f : 0.f;
  comm->AllReduceSum(tern::Tensor(&flag, tern::Shape{1}));
  if (flag > 0) rc_all = 1;
  comm.reset();
  return rc_all;
}
