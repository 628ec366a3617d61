# Installs the library, its public headers and a CMake package so that a
# consumer project can `find_package(varstate)` and link varstate::varstate.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Public headers: every header of the API modules, under the one prefix the
# project itself uses (<varstate/runtime/variable.h>). Kernel headers,
# and internal headers (named *_internal.h) stay private.
foreach(_dir base device runtime checkpoint)
  install(DIRECTORY varstate/${_dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/varstate/${_dir}
          FILES_MATCHING PATTERN "*.h" PATTERN "*_internal.h" EXCLUDE)
endforeach()
if(VARSTATE_HAVE_MPI)
  install(DIRECTORY varstate/distributed/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/varstate/distributed
          FILES_MATCHING PATTERN "*.h" PATTERN "*_internal.h" EXCLUDE)
endif()
install(FILES varstate/varstate.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/varstate)

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
