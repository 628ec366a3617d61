# Protobuf schemas with TensorFlow's field numbers. Generated code lands in
# the build tree as proto/<name>.pb.{h,cc}; it is private to the library.
set(VARSTATE_PROTOS
  ${CMAKE_CURRENT_LIST_DIR}/types.proto
  ${CMAKE_CURRENT_LIST_DIR}/tensor_shape.proto
  ${CMAKE_CURRENT_LIST_DIR}/tensor_slice.proto
  ${CMAKE_CURRENT_LIST_DIR}/versions.proto
  ${CMAKE_CURRENT_LIST_DIR}/tensor_bundle.proto
  ${CMAKE_CURRENT_LIST_DIR}/variable.proto
  ${CMAKE_CURRENT_LIST_DIR}/saver.proto
  ${CMAKE_CURRENT_LIST_DIR}/tensor.proto
  ${CMAKE_CURRENT_LIST_DIR}/saved_tensor_slices.proto
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_state.proto
  ${CMAKE_CURRENT_LIST_DIR}/graph.proto
  ${CMAKE_CURRENT_LIST_DIR}/meta_graph.proto)
add_library(varstate_proto OBJECT ${VARSTATE_PROTOS})
target_link_libraries(varstate_proto PUBLIC protobuf::libprotobuf)
target_include_directories(varstate_proto PUBLIC ${CMAKE_CURRENT_BINARY_DIR})
protobuf_generate(TARGET varstate_proto LANGUAGE cpp
  IMPORT_DIRS ${CMAKE_CURRENT_SOURCE_DIR}
  PROTOC_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
target_sources(varstate PRIVATE $<TARGET_OBJECTS:varstate_proto>)
target_include_directories(varstate PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
add_dependencies(varstate varstate_proto)
