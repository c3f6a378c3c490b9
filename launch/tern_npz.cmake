# tern-npz: Transformer models to and from Marian's .npz (links no MPI).
if(TERN_HAVE_DATA_VOCAB AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/tern_npz.cc)
  add_executable(tern-npz ${CMAKE_CURRENT_LIST_DIR}/tern_npz.cc)
  target_link_libraries(tern-npz PRIVATE tern_inference_vocab)
endif()
