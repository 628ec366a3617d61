target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cpu_device.cc
  ${CMAKE_CURRENT_LIST_DIR}/device.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_manager.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_spec.cc
  ${CMAKE_CURRENT_LIST_DIR}/placement.cc
  ${CMAKE_CURRENT_LIST_DIR}/replica_device_setter.cc)
if(VARSTATE_HAVE_CUDA)
  target_sources(varstate PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_device.cc)
endif()
