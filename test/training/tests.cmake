# Tests of training/: the training ops and the optimizers, on each device.
varstate_add_test(test_optimizers DEVICES SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/moving_averages_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/learning_rate_decay_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/training_util_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/training_ops_test.cc)
# Hand-written references round every operation as written.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/training_ops_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/moving_averages_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/learning_rate_decay_test.cc
  PROPERTIES COMPILE_OPTIONS -ffp-contract=off)
