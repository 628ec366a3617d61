# Installs the library, its public headers and a CMake package so that a
# consumer project can `find_package(varstate)` and link varstate::varstate.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Public headers: exactly include/varstate/ (the API is opt-in by location;
# module headers beside their .cc files are private). A build without MPI
# leaves out the multi-process headers, whose code it does not build.
if(VARSTATE_HAVE_MPI)
  install(DIRECTORY include/varstate DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h")
else()
  install(DIRECTORY include/varstate DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
          FILES_MATCHING PATTERN "*.h"
          PATTERN "cluster.h" EXCLUDE PATTERN "distributed_saver.h" EXCLUDE)
endif()

install(TARGETS varstate EXPORT varstateTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT varstateTargets NAMESPACE varstate::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/varstate)
# The shared library keeps its dependencies private: its package asks only
# for Threads (in the link interface). A static library's consumer links its
# dependencies too, so that package finds them.
set(VARSTATE_CONFIG_PRIVATE_DEPENDENCIES "")
if(NOT VARSTATE_SHARED)
  string(JOIN "\n" VARSTATE_CONFIG_PRIVATE_DEPENDENCIES
    "find_dependency(Eigen3 3.4 NO_MODULE)" "find_dependency(fmt)" "find_dependency(spdlog)"
    "find_dependency(leveldb)" "find_dependency(Protobuf)")
  if(VARSTATE_HAVE_CUDA)
    string(APPEND VARSTATE_CONFIG_PRIVATE_DEPENDENCIES "\nfind_dependency(CUDAToolkit)")
  endif()
endif()
configure_package_config_file(cmake/varstateConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/varstateConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/varstate)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/varstateConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/varstateConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/varstateConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/varstate)

# pkg-config: `pkg-config --cflags --libs varstate` for projects built
# without CMake. The shared library keeps its dependencies private, so the
# file names libvarstate alone; the macros that select parts of the API
# (varstate/varstate.h includes the multi-process headers with MPI) follow
# the build.
if(VARSTATE_SHARED)
  file(RELATIVE_PATH VARSTATE_PC_PREFIX_FROM_PCDIR
       "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  set(VARSTATE_PC_DEFINES "")
  if(VARSTATE_HAVE_CUDA)
    string(APPEND VARSTATE_PC_DEFINES " -DVARSTATE_HAVE_CUDA=1")
  endif()
  if(VARSTATE_HAVE_MPI)
    string(APPEND VARSTATE_PC_DEFINES " -DVARSTATE_HAVE_MPI=1")
  endif()
  configure_file(cmake/varstate.pc.in ${CMAKE_CURRENT_BINARY_DIR}/varstate.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/varstate.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

include(VarstatePackage)
