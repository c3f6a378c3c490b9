add_executable(bench-train-step ${CMAKE_CURRENT_SOURCE_DIR}/bench_train_step.cc)
target_link_libraries(bench-train-step PRIVATE tern_models tern_optim ${GFLAGS_LIB})
