# Tests of the emulated GPUs themselves (VARSTATE_CUDA=EMULATE builds only):
# the default run, the lazy schedule's tests in a run with that schedule,
# and each sticky device fault in a process of its own.
if(VARSTATE_CUDA_EMULATED)
  varstate_add_test(test_cuda_emulation SOURCES)
  varstate_cuda_emulated_sources(test_cuda_emulation
    ${CMAKE_CURRENT_LIST_DIR}/emulation_test.cu)
  target_link_libraries(test_cuda_emulation PRIVATE CUDA::cudart)
  set_tests_properties(test_cuda_emulation PROPERTIES LABELS emulation)
  add_test(NAME test_cuda_emulation_lazy COMMAND test_cuda_emulation "[lazy]")
  set_tests_properties(test_cuda_emulation_lazy PROPERTIES
    LABELS emulation ENVIRONMENT VARSTATE_EMULATED_GPU_SCHEDULE=lazy)
  foreach(_fault atomic_fault trap_fault)
    add_test(NAME test_cuda_emulation_${_fault} COMMAND test_cuda_emulation "[${_fault}]")
    set_tests_properties(test_cuda_emulation_${_fault} PROPERTIES LABELS emulation)
  endforeach()
endif()
