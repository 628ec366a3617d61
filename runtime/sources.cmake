target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cast.cc
  ${CMAKE_CURRENT_LIST_DIR}/dense_update.cc
  ${CMAKE_CURRENT_LIST_DIR}/graph.cc
  ${CMAKE_CURRENT_LIST_DIR}/math_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/initializers.cc
  ${CMAKE_CURRENT_LIST_DIR}/random_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/random_seed.cc
  ${CMAKE_CURRENT_LIST_DIR}/indexed_slices.cc
  ${CMAKE_CURRENT_LIST_DIR}/scatter.cc
  ${CMAKE_CURRENT_LIST_DIR}/session.cc
  ${CMAKE_CURRENT_LIST_DIR}/slice.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/tensor_shape.cc
  ${CMAKE_CURRENT_LIST_DIR}/variable.cc
  ${CMAKE_CURRENT_LIST_DIR}/variables.cc)
