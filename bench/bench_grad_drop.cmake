# bench-grad-drop: bytes sent per update with gradient dropping against dense, same run.
# Run: build/bin/bench-grad-drop [--drop_rate=0.99] [--params=N] [--ranks=2]
add_executable(bench-grad-drop ${CMAKE_CURRENT_LIST_DIR}/bench_grad_drop.cc)
target_link_libraries(bench-grad-drop PRIVATE tern_ps tern_comm ${GFLAGS_LIB})
