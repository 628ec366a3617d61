varstate_add_test(test_runtime DEVICES SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cast_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dense_update_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dirty_rows_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dirty_rows_log_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dynamic_variable_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/float16_ops_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/floor_division_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/math_ops_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/slice_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/initializers_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/random_ops_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/indexed_slices_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/scatter_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/variable_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/variable_storage_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/variables_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/variable_scope_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/partitioners_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/partitioned_variable_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/gather_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/template_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/state_ops_test.cc)
# The element-wise ops, casts between floating types and matmul are built
# per instruction set (kernels/cpu/elementwise.cc, cast.cc, matmul_rows.h):
# the narrower ones too, on a CPU that has the wider (avx512: matmul's
# bfloat16 products without the AMX tiles).
foreach(isa baseline avx2 avx512)
  add_test(NAME test_runtime_${isa} COMMAND test_runtime "[isa]")
  set_tests_properties(test_runtime_${isa} PROPERTIES
    LABELS cpu ENVIRONMENT VARSTATE_CPU_ISA=${isa})
endforeach()
varstate_add_test(test_runtime_gpu GPU SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/cast_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dense_update_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/math_ops_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/slice_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/initializers_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/scatter_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/variable_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dirty_rows_gpu_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/partitioned_variable_gpu_test.cc)
if(VARSTATE_HAVE_CUDA)
  target_link_libraries(test_runtime_gpu PRIVATE CUDA::cudart)  # test/stream_gate.h
endif()
