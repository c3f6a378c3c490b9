# bench-ps: parameter-server push+pull throughput against plain MPI send/recv of the same bytes.
# Run: mpirun -np 2 --oversubscribe build/bin/bench-ps [--params=N] [--steps=S]
add_executable(bench-ps ${CMAKE_CURRENT_LIST_DIR}/bench_ps.cc)
target_link_libraries(bench-ps PRIVATE tern_ps tern_comm MPI::MPI_CXX ${GFLAGS_LIB})
