add_executable(tern-train ${CMAKE_CURRENT_SOURCE_DIR}/tern_train.cc)
target_link_libraries(tern-train PRIVATE tern_trainer tern_comm MPI::MPI_CXX ${GFLAGS_LIB})
