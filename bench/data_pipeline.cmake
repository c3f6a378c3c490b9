# bench-data-pipeline: vocabulary training time and batching throughput (data/).
add_executable(bench-data-pipeline ${CMAKE_CURRENT_LIST_DIR}/data_pipeline.cc)
target_link_libraries(bench-data-pipeline PRIVATE tern_data)
