# Sources of distributed/ (built with VARSTATE_HAVE_MPI only).
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cluster.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_storage.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_keyed_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_sparse.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_modify.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_window.cc
  ${CMAKE_CURRENT_LIST_DIR}/distributed_saver.cc
)
# In the build: the imported target. Installed: the library files themselves,
# so that a consumer (which may enable only CXX, while FindMPI's C component
# needs the C language) does not have to find MPI.
target_link_libraries(varstate PRIVATE $<BUILD_INTERFACE:MPI::MPI_C>)
foreach(_lib IN LISTS MPI_C_LIBRARIES)
  target_link_libraries(varstate PRIVATE $<INSTALL_INTERFACE:${_lib}>)
endforeach()
target_compile_definitions(varstate PUBLIC VARSTATE_HAVE_MPI=1)
# The C API only (no deprecated C++ bindings from mpi.h), for every file
# that includes mpi.h.
set_source_files_properties(
  ${CMAKE_CURRENT_LIST_DIR}/cluster.cc ${CMAKE_CURRENT_LIST_DIR}/mpi_storage.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_keyed_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_sparse.cc ${CMAKE_CURRENT_LIST_DIR}/mpi_window.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_modify.cc
  ${CMAKE_CURRENT_LIST_DIR}/distributed_saver.cc PROPERTIES
  COMPILE_DEFINITIONS "OMPI_SKIP_MPICXX=1;MPICH_SKIP_MPICXX=1")
