# CPU kernels (Eigen) are always built; CUDA kernels when VARSTATE_HAVE_CUDA.
# Heavy template instantiations live in separate files so that 2 cores build
# them in parallel.
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cpu/cast.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/eigen_device.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/dense_update.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/elementwise.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_half_complex.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/slice.cc)
if(VARSTATE_HAVE_CUDA)
  target_sources(varstate PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/cuda/cast.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/dense_update.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_float.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_int.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_complex.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_compare.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_unary.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/matmul.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/slice.cu)
endif()
