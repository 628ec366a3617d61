# Sources of distributed/ (built with VARSTATE_HAVE_MPI only).
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cluster.cc
  ${CMAKE_CURRENT_LIST_DIR}/distributed_saver.cc
)
target_link_libraries(varstate PRIVATE MPI::MPI_C)
target_compile_definitions(varstate PUBLIC VARSTATE_HAVE_MPI=1)
# The C API only (no deprecated C++ bindings from mpi.h).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/cluster.cc PROPERTIES
  COMPILE_DEFINITIONS "OMPI_SKIP_MPICXX=1;MPICH_SKIP_MPICXX=1")
