# Sources of distributed/ (built with VARSTATE_HAVE_MPI only).
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cluster.cc
)
target_link_libraries(varstate PRIVATE MPI::MPI_C)
target_compile_definitions(varstate PUBLIC VARSTATE_HAVE_MPI=1)
