# CUDA detection. VARSTATE_CUDA=AUTO builds the CUDA kernels when nvcc is
# found, ON requires it, OFF never uses it, EMULATE compiles the same CUDA
# sources with the host C++ compiler against emulated GPUs (cuda_emulation/;
# VARSTATE_EMULATED_GPUS at run time, 2 by default), so every GPU path runs
# on a machine without one. Sets VARSTATE_HAVE_CUDA (the GPU code paths are
# built) and VARSTATE_CUDA_EMULATED.
include(CheckLanguage)
set(VARSTATE_HAVE_CUDA OFF)
set(VARSTATE_CUDA_EMULATED OFF)
# The architecture the emulated device code is compiled as (__CUDA_ARCH__):
# 900 takes the sm_90 paths (16-byte compare-and-swap, vector atomics); 800
# their fallbacks.
set(VARSTATE_EMULATED_CUDA_ARCH 900 CACHE STRING "__CUDA_ARCH__ of emulated device code")
if(VARSTATE_CUDA STREQUAL "EMULATE")
  # The toolkit's headers (runtime API types, __half, libcu++) only: no
  # nvcc, no libcudart, no GPU.
  find_path(VARSTATE_CUDA_INCLUDE_DIR cuda_runtime_api.h
    HINTS /usr/local/cuda/include ENV CUDA_HOME PATH_SUFFIXES include REQUIRED)
  set(VARSTATE_HAVE_CUDA ON)
  set(VARSTATE_CUDA_EMULATED ON)
  include(${CMAKE_CURRENT_SOURCE_DIR}/cuda_emulation/sources.cmake)
elseif(NOT VARSTATE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flags for nvcc 13
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(VARSTATE_HAVE_CUDA ON)
    # Kernels must not contract a*b+c differently on host and device unless
    # written so; initializers rely on it for bit-identical results.
    set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} --fmad=false --expt-relaxed-constexpr -Xcompiler=-fPIC")
  elseif(VARSTATE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "VARSTATE_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "varstate: CUDA kernels ${VARSTATE_HAVE_CUDA} (emulated GPUs: ${VARSTATE_CUDA_EMULATED})")
