# Emulated GPUs (VARSTATE_CUDA=EMULATE): a library that takes the place of
# libcudart and libcublas (the targets CUDA::cudart and CUDA::cublas name it),
# and varstate_cuda_emulated_sources(), which compiles .cu files with the
# host C++ compiler against cuda_emulation/prelude.h.
if(VARSTATE_SHARED)
  add_library(varstate_cuda_emulation SHARED)
  set_target_properties(varstate_cuda_emulation PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  add_library(varstate_cuda_emulation STATIC)
endif()
target_sources(varstate_cuda_emulation PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cublas.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_memory.cc
  ${CMAKE_CURRENT_LIST_DIR}/fiber.cc
  ${CMAKE_CURRENT_LIST_DIR}/kernel_launch.cc
  ${CMAKE_CURRENT_LIST_DIR}/runtime_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/streams.cc)
target_compile_features(varstate_cuda_emulation PUBLIC cxx_std_20)
# Every threadIdx, blockIdx and atomic reads this library's thread-locals:
# the initial-exec model reads them at a fixed offset instead of calling
# __tls_get_addr (which AddressSanitizer intercepts). The library is linked,
# never dlopen'ed, and its thread-locals are a few words.
target_compile_options(varstate_cuda_emulation PRIVATE -ftls-model=initial-exec)
target_include_directories(varstate_cuda_emulation
  PUBLIC $<BUILD_INTERFACE:${VARSTATE_CUDA_INCLUDE_DIR}>
         $<BUILD_INTERFACE:${VARSTATE_CUDA_INCLUDE_DIR}/cccl>
  PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(varstate_cuda_emulation
  PUBLIC VARSTATE_CUDA_EMULATED=1 VARSTATE_EMULATED_CUDA_ARCH=${VARSTATE_EMULATED_CUDA_ARCH})
find_package(Threads REQUIRED)
# 16-byte compare-and-swap (atomicCAS on sm_90) is libatomic's on x86-64;
# fault reports name the kernel through dladdr.
target_link_libraries(varstate_cuda_emulation PUBLIC Threads::Threads atomic ${CMAKE_DL_LIBS})
add_library(CUDA::cudart ALIAS varstate_cuda_emulation)
add_library(CUDA::cublas ALIAS varstate_cuda_emulation)
install(TARGETS varstate_cuda_emulation EXPORT varstateTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# Compiles `target`'s CUDA sources as C++: the prelude first, the emulated
# CUB before the toolkit's, no contraction into FMA (nvcc runs --fmad=false),
# and no type-based alias analysis (kernels reinterpret element bits).
function(varstate_cuda_emulated_sources target)
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES
    LANGUAGE CXX
    COMPILE_OPTIONS "-include;${PROJECT_SOURCE_DIR}/cuda_emulation/prelude.h;-ffp-contract=off;-fno-strict-aliasing;-Wno-unknown-pragmas")
  target_include_directories(${target} BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/cuda_emulation/include)
  target_sources(${target} PRIVATE ${ARGN})
endfunction()
