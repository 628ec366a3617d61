varstate_add_test(test_device SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device_spec_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/replica_device_setter_test.cc)
varstate_add_test(test_device_gpu GPU SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/device_gpu_test.cc)
