# bench-decode-speed: beam search throughput of the inference runtime (random Transformer-base).
add_executable(bench-decode-speed ${CMAKE_CURRENT_LIST_DIR}/decode_speed.cc)
target_link_libraries(bench-decode-speed PRIVATE tern_inference_testing)
