# bench-gemm: int16/int8 GEMM against OpenBLAS sgemm at the decoder's shapes, single thread.
# Run: build/bin/bench-gemm [--m=1,2,4,8] [--shapes=512x512,...] [--types=int16,int8]
add_executable(bench-gemm ${CMAKE_CURRENT_LIST_DIR}/bench_gemm.cc)
target_link_libraries(bench-gemm PRIVATE tern_tensor ${GFLAGS_LIB})
