# CPack: `cpack --config build/CPackConfig.cmake` (or `cmake --build build
# --target package`) makes a .deb and a .tar.gz of the installed tree: the
# runtime library, the varstate CLI, the public headers, the CMake package
# and varstate.pc. The .deb declares the Debian packages of the shared
# libraries libvarstate links; the CUDA runtime and cuBLAS come from NVIDIA's
# toolkit (no Debian package of this CUDA version), which the library finds
# through its RPATH.
set(CPACK_PACKAGE_NAME varstate)
set(CPACK_PACKAGE_VENDOR "varstate developers")
set(CPACK_PACKAGE_CONTACT "varstate developers <varstate@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "TensorFlow-style variables, sparse updates and checkpoints for C++ GPU training programs")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# One tarball of the whole tree, rooted at its prefix (usr/...).
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY OFF)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)

# Depends: the Debian package of each shared library libvarstate links,
# asked of dpkg at configure time (a library not installed from a package,
# like NVIDIA's CUDA toolkit, is left out and noted above).
set(_varstate_deb_depends libc6 libstdc++6 libgcc-s1)
if(VARSTATE_SHARED)
  set(_varstate_dep_targets leveldb::leveldb protobuf::libprotobuf spdlog::spdlog fmt::fmt)
  foreach(_target IN LISTS _varstate_dep_targets)
    if(TARGET ${_target})
      get_target_property(_type ${_target} TYPE)
      if(_type STREQUAL "INTERFACE_LIBRARY")
        continue()
      endif()
      get_target_property(_location ${_target} LOCATION)
      list(APPEND _varstate_dep_files ${_location})
    endif()
  endforeach()
  if(VARSTATE_HAVE_MPI)
    list(APPEND _varstate_dep_files ${MPI_C_LIBRARIES})
  endif()
  find_program(_dpkg_query dpkg-query)
  foreach(_file IN LISTS _varstate_dep_files)
    if(NOT _dpkg_query)
      break()
    endif()
    get_filename_component(_real ${_file} REALPATH)
    execute_process(COMMAND ${_dpkg_query} -S ${_real} OUTPUT_VARIABLE _owner
                    ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
    if(_rc EQUAL 0)
      string(REGEX REPLACE ":.*" "" _package "${_owner}")
      list(APPEND _varstate_deb_depends ${_package})
    endif()
  endforeach()
endif()
list(REMOVE_DUPLICATES _varstate_deb_depends)
list(JOIN _varstate_deb_depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
include(CPack)
