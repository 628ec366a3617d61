# Tests of checkpoint/.
varstate_add_test(test_checkpoint SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/crc32c_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_system_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_slice_test.cc)
