# Tests of checkpoint/.
varstate_add_test(test_checkpoint DEVICES SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/crc32c_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/varint_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/fault_injection_file_system.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_system_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_slice_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bundle_slices_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bundle_corruption_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/v1_reader_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/v1_writer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_state_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_utils_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver_failure_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/partitioned_saver_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/meta_graph_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/meta_graph_ops_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/reliability_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/incremental_saver_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/compact_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/chain_safety_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dynamic_variable_checkpoint_test.cc)
varstate_add_test(test_checkpoint_gpu GPU SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/saver_gpu_test.cc)

# Smoke tests of `varstate inspect` on TensorFlow's own checkpoints.
if(TARGET varstate_cli)
  add_test(NAME inspect_tf_v2 COMMAND varstate_cli inspect
           ${PROJECT_SOURCE_DIR}/test/testdata/tensorflow/half_plus_two_v2/variables)
  set_tests_properties(inspect_tf_v2 PROPERTIES LABELS cpu
                       PASS_REGULAR_EXPRESSION "c2 +float32 +\\[\\] +0 +4 +3 +3 +3")
  add_test(NAME inspect_tf_v1 COMMAND varstate_cli inspect
           ${PROJECT_SOURCE_DIR}/test/testdata/tensorflow/half_plus_two_v1/export)
  set_tests_properties(inspect_tf_v1 PROPERTIES LABELS cpu
                       PASS_REGULAR_EXPRESSION "Variable_1 +float32 +\\[\\] +0 +4 +2 +2 +2")
  add_test(NAME inspect_tf_v2_tensor COMMAND varstate_cli inspect
           ${PROJECT_SOURCE_DIR}/test/testdata/tensorflow/half_plus_two_v2/variables --tensor a)
  set_tests_properties(inspect_tf_v2_tensor PROPERTIES LABELS cpu PASS_REGULAR_EXPRESSION "0.5")
endif()

# libFuzzer target for the readers (clang only): -DVARSTATE_BUILD_FUZZERS=ON.
if(VARSTATE_BUILD_FUZZERS)
  add_executable(bundle_fuzz ${CMAKE_CURRENT_LIST_DIR}/bundle_fuzz.cc)
  target_link_libraries(bundle_fuzz PRIVATE varstate_private)
  target_compile_options(bundle_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(bundle_fuzz PRIVATE -fsanitize=fuzzer)
  add_test(NAME bundle_fuzz_smoke
           COMMAND bundle_fuzz -runs=2000 -seed=1 ${CMAKE_CURRENT_LIST_DIR}/fuzz_corpus)
  set_tests_properties(bundle_fuzz_smoke PROPERTIES LABELS "cpu;fuzz")

  # Multi-shard bundles + Saver::restore, the state file and .meta files;
  # its seeds are written by make_checkpoint_fuzz_corpus (real saves).
  add_executable(checkpoint_fuzz ${CMAKE_CURRENT_LIST_DIR}/checkpoint_fuzz.cc)
  target_link_libraries(checkpoint_fuzz PRIVATE varstate_private)
  target_compile_options(checkpoint_fuzz PRIVATE -fsanitize=fuzzer)
  target_link_options(checkpoint_fuzz PRIVATE -fsanitize=fuzzer)
  add_executable(make_checkpoint_fuzz_corpus ${CMAKE_CURRENT_LIST_DIR}/checkpoint_fuzz.cc)
  target_link_libraries(make_checkpoint_fuzz_corpus PRIVATE varstate_private)
  target_compile_definitions(make_checkpoint_fuzz_corpus PRIVATE VARSTATE_FUZZ_CORPUS_MAIN)
  set(checkpoint_fuzz_corpus ${CMAKE_CURRENT_BINARY_DIR}/checkpoint_fuzz_corpus)
  add_test(NAME checkpoint_fuzz_corpus COMMAND make_checkpoint_fuzz_corpus ${checkpoint_fuzz_corpus})
  set_tests_properties(checkpoint_fuzz_corpus PROPERTIES LABELS "cpu;fuzz" FIXTURES_SETUP checkpoint_fuzz_seeds)
  add_test(NAME checkpoint_fuzz_smoke COMMAND checkpoint_fuzz -runs=2000 -seed=1 ${checkpoint_fuzz_corpus})
  set_tests_properties(checkpoint_fuzz_smoke PROPERTIES LABELS "cpu;fuzz" FIXTURES_REQUIRED checkpoint_fuzz_seeds)
endif()
# Optimizer state in checkpoints: restore and continue, on each device.
varstate_add_test(test_optimizer_checkpoints DEVICES SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_saver_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_chain_test.cc)
