# tern-score: BLEU and chrF of hypotheses (stdin) against a reference file, as sacrebleu prints them.
add_executable(tern-score ${CMAKE_CURRENT_LIST_DIR}/tern_score.cc)
target_link_libraries(tern-score PRIVATE tern_data ${GFLAGS_LIB})
