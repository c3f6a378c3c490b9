# tern-export: a checkpoint to a .tern model file (float32, int16 or int8 weights). Links no MPI.
add_executable(tern-export ${CMAKE_CURRENT_LIST_DIR}/tern_export.cc)
target_link_libraries(tern-export PRIVATE tern_checkpoint tern_models tern_inference tern_data)
