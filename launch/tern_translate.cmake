# tern-translate: raw text in, translations out, with a .tern model (links no MPI).
if(TERN_HAVE_DATA_VOCAB AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/tern_translate.cc)
  add_executable(tern-translate ${CMAKE_CURRENT_LIST_DIR}/tern_translate.cc)
  target_link_libraries(tern-translate PRIVATE tern_inference_vocab)
endif()
