# CPU kernels (Eigen) are always built; CUDA kernels when VARSTATE_HAVE_CUDA.
# Heavy template instantiations live in separate files so that 2 cores build
# them in parallel.
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cpu/cast.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/cpu_isa.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/dense_update.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/eigen_device.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/elementwise.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_rows_baseline.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_rows_complex.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/gather.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/half_blocks.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/hash_index.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/index_check.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/parallel.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/random.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/scatter.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/scatter_complex.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/scatter_int.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/slice.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/stream_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/training_ops.cc)
# The random transforms must round every operation as written, so that host
# and device give the same bits (nvcc already runs with --fmad=false).
# Without errno and trap semantics, which change no value, GCC can vectorize
# the transforms (sqrt and a guarded division become plain vector operations).
# The training ops too, so that their results match TensorFlow's (no
# contraction into FMA) and their loops vectorize.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/random.cc
  ${CMAKE_CURRENT_LIST_DIR}/cpu/training_ops.cc PROPERTIES COMPILE_OPTIONS "-ffp-contract=off;-fno-math-errno;-fno-trapping-math")
# multiply_add must round each product, as the separate ops do.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/elementwise.cc PROPERTIES COMPILE_OPTIONS "-ffp-contract=off;-fno-math-errno;-fno-trapping-math")
# So must scatter_sub_scaled (a multiply, then scatter_sub).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/scatter.cc PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
# Eigen's GEMM again for AVX2 and AVX-512, each with FMA (matmul_rows.h):
# Eigen's vector width follows the compiler flags, so these two files get
# their own, and matmul.cc calls them only on a CPU that has those sets.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$" AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_sources(varstate PRIVATE
    ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_rows_avx2.cc
    ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_rows_avx512.cc)
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_rows_avx2.cc
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_rows_avx512.cc
    PROPERTIES COMPILE_OPTIONS "-mavx512f;-mavx512vl;-mavx512bw;-mavx512dq;-mfma")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/matmul.cc
    PROPERTIES COMPILE_DEFINITIONS VARSTATE_MATMUL_ISA_VARIANTS)
  # bfloat16 products on AMX tiles, where the compiler knows them: the tile
  # instructions only (the rest of the file is baseline code).
  include(CheckCXXCompilerFlag)
  check_cxx_compiler_flag("-mamx-tile -mamx-bf16" VARSTATE_HAVE_AMX_FLAGS)
  if(VARSTATE_HAVE_AMX_FLAGS)
    target_sources(varstate PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_amx.cc)
    set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/matmul_amx.cc
      PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-bf16")
    set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cpu/matmul.cc
      PROPERTIES COMPILE_DEFINITIONS "VARSTATE_MATMUL_ISA_VARIANTS;VARSTATE_MATMUL_AMX")
  endif()
endif()
if(VARSTATE_HAVE_CUDA)
  set(_cuda_sources
    ${CMAKE_CURRENT_LIST_DIR}/cuda/cast.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/dense_update.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/device_info.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/dirty_marks.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_complex.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_compare.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_float.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_int.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/elementwise_unary.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/matmul.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/gather.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/hash_index.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/random.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/scatter.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/scatter_complex.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/scatter_float.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/scatter_half.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/scatter_int.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/scatter_int_wide.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/slice.cu
    ${CMAKE_CURRENT_LIST_DIR}/cuda/training_ops.cu)
  if(VARSTATE_CUDA_EMULATED)
    varstate_cuda_emulated_sources(varstate ${_cuda_sources})
  else()
    target_sources(varstate PRIVATE ${_cuda_sources})
  endif()
endif()
