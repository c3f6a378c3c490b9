# bench-fused-output: the fused bias+softmax+top-k pass against the unfused sequence on the GPU
# (or --device cpu), beams 1/4/8, vocabularies 8k/32k/64k, same run.
# Run: build/bin/bench-fused-output [--device cuda|cpu] [--vocabs ...] [--beams ...] [--batches ...]
add_executable(bench-fused-output ${CMAKE_CURRENT_LIST_DIR}/bench_fused_output.cc)
target_link_libraries(bench-fused-output PRIVATE tern_inference ${GFLAGS_LIB})
