# The output-vocabulary table flags, shared by tern-export and tern-vocab-tables.
add_library(tern_vocab_table_flags STATIC ${CMAKE_CURRENT_LIST_DIR}/vocab_table_flags.cc)
target_link_libraries(tern_vocab_table_flags PUBLIC tern_inference ${GFLAGS_LIB})

# tern-export: a checkpoint to a .tern model file (float32, int16 or int8 weights, optionally the
# shortlist and cluster tables). Links no MPI.
add_executable(tern-export ${CMAKE_CURRENT_LIST_DIR}/tern_export.cc)
target_link_libraries(tern-export PRIVATE tern_checkpoint tern_models tern_inference
                      tern_inference_vocab tern_vocab_table_flags tern_data)
