# Tests of the varstate CLI (tools/cli/), run on the built binary.
if(NOT TARGET varstate_cli)
  return()
endif()
# Bad input: one line on stderr and a non-zero exit code, per case.
add_test(NAME cli_errors COMMAND ${CMAKE_CURRENT_LIST_DIR}/cli_test.sh $<TARGET_FILE:varstate_cli>
                                 ${PROJECT_SOURCE_DIR}/test/testdata)
set_tests_properties(cli_errors PROPERTIES LABELS cli)
# The main job on a small configuration: RMSE near the noise level,
# bit-identical checkpoints per seed, --resume.
add_test(NAME cli_demo COMMAND ${CMAKE_CURRENT_LIST_DIR}/demo_test.sh $<TARGET_FILE:varstate_cli>)
set_tests_properties(cli_demo PROPERTIES LABELS cli TIMEOUT 300)
# The main job on GPUs (emulated ones in CI) against the CPU; skipped
# without a GPU. TensorFlow (the interop suite's environment) checks the
# GPU run's checkpoint when it is installed.
if(VARSTATE_HAVE_CUDA)
  add_test(NAME cli_demo_gpu COMMAND ${CMAKE_CURRENT_LIST_DIR}/demo_gpu_test.sh
                                     $<TARGET_FILE:varstate_cli>)
  set_tests_properties(cli_demo_gpu PROPERTIES LABELS "cli;gpu" TIMEOUT 1200
                       SKIP_RETURN_CODE ${VARSTATE_TEST_SKIP_CODE})
endif()
if(VARSTATE_BUILD_BENCH)
  add_test(NAME cli_bench COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench_test.sh $<TARGET_FILE:varstate_cli>)
  set_tests_properties(cli_bench PROPERTIES LABELS cli TIMEOUT 300)
endif()
