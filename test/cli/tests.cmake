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
if(VARSTATE_BUILD_BENCH)
  add_test(NAME cli_bench COMMAND ${CMAKE_CURRENT_LIST_DIR}/bench_test.sh $<TARGET_FILE:varstate_cli>)
  set_tests_properties(cli_bench PROPERTIES LABELS cli TIMEOUT 300)
endif()
