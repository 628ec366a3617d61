# Sources of checkpoint/.
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/crc32c.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_system.cc
  ${CMAKE_CURRENT_LIST_DIR}/unsynced_file_system.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_files.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_retention.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_data.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_slice.cc
  ${CMAKE_CURRENT_LIST_DIR}/ordered_code.cc
  ${CMAKE_CURRENT_LIST_DIR}/proto_convert.cc
  ${CMAKE_CURRENT_LIST_DIR}/graph_def_builder.cc
  ${CMAKE_CURRENT_LIST_DIR}/table.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_reader.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle_reader.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/v1_reader.cc
  ${CMAKE_CURRENT_LIST_DIR}/v1_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_state.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver_io.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver_restore.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver_def.cc
  ${CMAKE_CURRENT_LIST_DIR}/live_save.cc
  ${CMAKE_CURRENT_LIST_DIR}/saver.cc
  ${CMAKE_CURRENT_LIST_DIR}/meta_graph.cc
  ${CMAKE_CURRENT_LIST_DIR}/meta_graph_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/meta_graph_initializers.cc)
