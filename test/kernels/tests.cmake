# Tests of kernels/.
varstate_add_test(test_kernels_scatter SOURCES ${CMAKE_CURRENT_LIST_DIR}/scatter_test.cc)
if(VARSTATE_HAVE_CUDA)
  varstate_add_test(test_kernels_scatter_gpu GPU SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/scatter_gpu_test.cc)
  target_link_libraries(test_kernels_scatter_gpu PRIVATE CUDA::cudart)
endif()
