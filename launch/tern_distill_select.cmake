# tern-distill-select: the sequence-level distillation target from teacher n-best lists.
add_executable(tern-distill-select ${CMAKE_CURRENT_LIST_DIR}/tern_distill_select.cc)
target_link_libraries(tern-distill-select PRIVATE tern_data)
