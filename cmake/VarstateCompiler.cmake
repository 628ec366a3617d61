# Compiler settings shared by every target: ccache, warnings, sanitizers.
find_program(VARSTATE_CCACHE ccache)
if(VARSTATE_CCACHE)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${VARSTATE_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${VARSTATE_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${VARSTATE_CCACHE})
endif()

# Options are aggregate structs filled with designated initializers, which
# GCC 12 flags under -Wmissing-field-initializers; trigraphs no longer exist
# in C++17; -Wrestrict and -Wmaybe-uninitialized give known false positives
# inside GCC 12's libstdc++ (string concatenation, std::regex).
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wall> $<$<COMPILE_LANGUAGE:CXX>:-Wextra>
                    $<$<COMPILE_LANGUAGE:CXX>:-Wno-unused-parameter>
                    $<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>
                    $<$<COMPILE_LANGUAGE:CXX>:-Wno-trigraphs>)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>
                      $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
endif()

if(VARSTATE_SANITIZE)
  set(_san -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  foreach(_flag IN LISTS _san)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${_flag}>)
  endforeach()
  add_link_options(${_san})
endif()

if(VARSTATE_BUILD_FUZZERS AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(WARNING "VARSTATE_BUILD_FUZZERS needs clang (CMAKE_CXX_COMPILER=clang++); fuzzers skipped")
  set(VARSTATE_BUILD_FUZZERS OFF)
endif()
if(VARSTATE_BUILD_FUZZERS)
  # Coverage instrumentation for libFuzzer plus the sanitizers it reports with.
  set(_fuzz -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${_fuzz}>")
  add_link_options(-fsanitize=address,undefined)
endif()
