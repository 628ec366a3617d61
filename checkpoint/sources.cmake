# Sources of checkpoint/.
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/crc32c.cc)
