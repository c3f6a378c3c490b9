// The Open MPI Communicator, for ranks in separate processes (`mpirun -np N ...`).
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace tern::comm {

// Initializes MPI on first use (requesting MPI_THREAD_MULTIPLE) and returns a communicator over
// a private duplicate of MPI_COMM_WORLD. MPI is finalized when the last such communicator is
// destroyed, if this function initialized it. When the library provides less than
// MPI_THREAD_MULTIPLE, every MPI call is serialized behind one mutex and blocking receives
// poll; that is slower, and a collective then holds the mutex until every rank joins it.
// Errors from MPI (a peer that died) become tern::Error.
std::unique_ptr<Communicator> MakeMpiCommunicator(int* argc = nullptr, char*** argv = nullptr);

// Whether this process runs under an MPI launcher (so N > 1 is possible), from the variables
// Open MPI and PMIx set; lets a program pick in-process or MPI without initializing MPI.
bool LaunchedByMpirun();

}  // namespace tern::comm
