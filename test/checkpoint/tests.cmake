# Tests of checkpoint/.
varstate_add_test(test_checkpoint SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/crc32c_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_system_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_slice_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bundle_slices_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/bundle_corruption_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/v1_reader_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_state_test.cc)
