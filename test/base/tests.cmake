varstate_add_test(test_base SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/dtype_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/error_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/huge_pages_test.cc)
