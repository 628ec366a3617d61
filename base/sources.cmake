target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/dtype.cc
  ${CMAKE_CURRENT_LIST_DIR}/error.cc
  ${CMAKE_CURRENT_LIST_DIR}/huge_pages.cc
  ${CMAKE_CURRENT_LIST_DIR}/logging.cc)
if(VARSTATE_HAVE_CUDA)
  target_sources(varstate PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cuda_check.cc)
endif()
