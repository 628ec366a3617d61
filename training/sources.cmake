# Sources of training/: the training ops, the optimizers and the global step.
target_sources(varstate PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/training_call.cc
  ${CMAKE_CURRENT_LIST_DIR}/keyed_training.cc
  ${CMAKE_CURRENT_LIST_DIR}/training_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/optimizer.cc
  ${CMAKE_CURRENT_LIST_DIR}/optimizers.cc
  ${CMAKE_CURRENT_LIST_DIR}/slot_creator.cc
  ${CMAKE_CURRENT_LIST_DIR}/moving_averages.cc
  ${CMAKE_CURRENT_LIST_DIR}/learning_rate_decay.cc
  ${CMAKE_CURRENT_LIST_DIR}/training_util.cc)
# The decay schedules round each operation as TensorFlow's scalar kernels.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/learning_rate_decay.cc
  PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
