# tern-vocab-tables: adds a lexical shortlist and/or vocabulary clusters to a .tern (links no MPI).
add_executable(tern-vocab-tables ${CMAKE_CURRENT_LIST_DIR}/tern_vocab_tables.cc)
target_link_libraries(tern-vocab-tables PRIVATE tern_inference_vocab tern_vocab_table_flags
                      ${GFLAGS_LIB})
