# Tests of kernels/.
varstate_add_test(test_kernels_random SOURCES ${CMAKE_CURRENT_LIST_DIR}/random_test.cc)
if(VARSTATE_HAVE_CUDA)
  varstate_add_test(test_kernels_random_gpu GPU SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/random_gpu_test.cc)
endif()
# Reference loops compute with the random transforms of kernels/philox.h on
# the host: round every operation as written, as kernels/cpu/random.cc does.
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/random_test.cc ${CMAKE_CURRENT_LIST_DIR}/random_gpu_test.cc
  PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
# Results must not depend on the size of the CPU thread pool.
add_test(NAME test_kernels_random_3_threads COMMAND test_kernels_random "[threads]")
set_tests_properties(test_kernels_random_3_threads PROPERTIES
  LABELS cpu ENVIRONMENT VARSTATE_CPU_THREADS=3)
varstate_add_test(test_kernels_hash_index SOURCES ${CMAKE_CURRENT_LIST_DIR}/hash_index_test.cc)
if(VARSTATE_HAVE_CUDA)
  varstate_add_test(test_kernels_hash_index_gpu GPU SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/hash_index_gpu_test.cc)
  target_link_libraries(test_kernels_hash_index_gpu PRIVATE CUDA::cudart)
endif()
varstate_add_test(test_kernels_scatter SOURCES ${CMAKE_CURRENT_LIST_DIR}/scatter_test.cc)
# Eigen::bfloat16's arithmetic is the bfloat16 reference (TensorFlow's CPU
# scatters compute with it).
target_link_libraries(test_kernels_scatter PRIVATE Eigen3::Eigen)
if(VARSTATE_HAVE_CUDA)
  varstate_add_test(test_kernels_scatter_gpu GPU SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/scatter_gpu_test.cc)
  target_link_libraries(test_kernels_scatter_gpu PRIVATE CUDA::cudart)
endif()
# The combining ops' loops on floating-point rows are built per instruction
# set (kernels/cpu/scatter_internal.h): the narrower ones too.
foreach(isa baseline avx2)
  add_test(NAME test_kernels_scatter_${isa} COMMAND test_kernels_scatter "[scatter]")
  set_tests_properties(test_kernels_scatter_${isa} PROPERTIES
    LABELS cpu ENVIRONMENT VARSTATE_CPU_ISA=${isa})
endforeach()
varstate_add_test(test_kernels_training SOURCES ${CMAKE_CURRENT_LIST_DIR}/training_ops_test.cc)
if(VARSTATE_HAVE_CUDA)
  varstate_add_test(test_kernels_training_gpu GPU SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/training_ops_gpu_test.cc)
  target_link_libraries(test_kernels_training_gpu PRIVATE CUDA::cudart)
endif()
# The reference loop must round as the kernels do (no contraction into FMA).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/training_ops_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/training_ops_gpu_test.cc PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
add_test(NAME test_kernels_training_3_threads COMMAND test_kernels_training "[threads]")
set_tests_properties(test_kernels_training_3_threads PROPERTIES
  LABELS cpu ENVIRONMENT VARSTATE_CPU_THREADS=3)
# The dense loops are built per instruction set (kernels/cpu/training_ops.cc):
# the narrower ones too, on a CPU that has the wider.
foreach(isa baseline avx2)
  add_test(NAME test_kernels_training_${isa} COMMAND test_kernels_training "[training]")
  set_tests_properties(test_kernels_training_${isa} PROPERTIES
    LABELS cpu ENVIRONMENT VARSTATE_CPU_ISA=${isa})
endforeach()
# The split over the thread pool: the same tests on 1, 2 and 5 pool threads.
varstate_add_test(test_kernels_threading SOURCES ${CMAKE_CURRENT_LIST_DIR}/threading_test.cc)
add_test(NAME test_kernels_threading_1_thread COMMAND test_kernels_threading)
set_tests_properties(test_kernels_threading_1_thread PROPERTIES
  LABELS cpu ENVIRONMENT VARSTATE_CPU_THREADS=1)
add_test(NAME test_kernels_threading_5_threads COMMAND test_kernels_threading)
set_tests_properties(test_kernels_threading_5_threads PROPERTIES
  LABELS cpu ENVIRONMENT VARSTATE_CPU_THREADS=5)
