# The TensorFlow interop suite: TensorFlow (the pinned wheel of
# test/interop/requirements.txt, installed by tools/interop_venv.sh) reads
# what varstate writes and vice versa. interop_tool is varstate's side; one
# pytest session is TensorFlow's. Configurations that turn it off (the
# sanitizer build) register a test that reports "skipped", so the suite
# never silently passes.
if(VARSTATE_BUILD_INTEROP_TESTS)
  add_executable(interop_tool ${CMAKE_CURRENT_LIST_DIR}/interop_tool.cc
                              ${CMAKE_CURRENT_LIST_DIR}/tensor_text.cc
                              ${CMAKE_CURRENT_LIST_DIR}/sharing_cases.cc
                              ${CMAKE_CURRENT_LIST_DIR}/placement_cases.cc
                              ${CMAKE_CURRENT_LIST_DIR}/optimizer_cases.cc)
  target_link_libraries(interop_tool PRIVATE varstate_private)
  add_test(NAME interop_tensorflow
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run_interop.sh $<TARGET_FILE:interop_tool>)
  set_tests_properties(interop_tensorflow PROPERTIES LABELS interop TIMEOUT 1500)
else()
  add_test(NAME interop_tensorflow
           COMMAND sh -c "echo 'interop suite not built (VARSTATE_BUILD_INTEROP_TESTS=OFF)'; exit ${VARSTATE_TEST_SKIP_CODE}")
  set_tests_properties(interop_tensorflow PROPERTIES LABELS interop
                       SKIP_RETURN_CODE ${VARSTATE_TEST_SKIP_CODE})
endif()
