# Tests of checkpoint/.
varstate_add_test(test_checkpoint SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/crc32c_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_system_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_slice_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bundle_slices_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bundle_corruption_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/v1_reader_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_state_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver_failure_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/meta_graph_test.cc)
varstate_add_test(test_checkpoint_gpu GPU SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/saver_gpu_test.cc)

# libFuzzer target for the readers (clang only): -DVARSTATE_BUILD_FUZZERS=ON.
if(VARSTATE_BUILD_FUZZERS)
  add_executable(bundle_fuzz ${CMAKE_CURRENT_LIST_DIR}/bundle_fuzz.cc)
  target_link_libraries(bundle_fuzz PRIVATE varstate::varstate)
  target_compile_options(bundle_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(bundle_fuzz PRIVATE -fsanitize=fuzzer)
  add_test(NAME bundle_fuzz_smoke
           COMMAND bundle_fuzz -runs=2000 -seed=1 ${CMAKE_CURRENT_LIST_DIR}/fuzz_corpus)
  set_tests_properties(bundle_fuzz_smoke PROPERTIES LABELS "cpu;fuzz")
endif()
