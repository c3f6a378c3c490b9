if(TERN_HAVE_DATA_VOCAB)
  add_executable(bench-decode ${CMAKE_CURRENT_SOURCE_DIR}/bench_decode.cc)
  target_link_libraries(bench-decode PRIVATE tern_inference_vocab ${GFLAGS_LIB})
endif()
