# CUDA detection. VARSTATE_CUDA=AUTO builds the CUDA kernels when nvcc is
# found, ON requires it, OFF never uses it. Sets VARSTATE_HAVE_CUDA.
include(CheckLanguage)
set(VARSTATE_HAVE_CUDA OFF)
if(NOT VARSTATE_CUDA STREQUAL "OFF")
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
message(STATUS "varstate: CUDA kernels ${VARSTATE_HAVE_CUDA}")
