# The multi-process tests: one binary run by mpirun in several modes
# (mpi_test_main.cc lists them; one file per subject), with 4 ranks
# oversubscribed on small machines. Ranks sleep while they wait
# (mpi_yield_when_idle, and the library's polled waits).
add_executable(mpi_test
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_util.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_checkpoint.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_failure.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_reshard.cc
  ${CMAKE_CURRENT_LIST_DIR}/mpi_test_incremental.cc)
target_link_libraries(mpi_test PRIVATE varstate_private MPI::MPI_C)
# The C API only (no deprecated C++ bindings from mpi.h).
target_compile_definitions(mpi_test PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
set(_mpirun ${MPIEXEC_EXECUTABLE} --oversubscribe)
set(_mpi_env
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1
  OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1)
if(VARSTATE_SANITIZE)
  # Under ASan + UBSan the MPI tests check memory errors but not leaks:
  # OpenMPI's dlopen'ed components leave ~120 KB per rank allocated at
  # MPI_Finalize, which LeakSanitizer reports from unnamed modules (no
  # suppression can name them).
  list(APPEND _mpi_env ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:allocator_may_return_null=1)
endif()
set(_ckpt ${CMAKE_CURRENT_BINARY_DIR}/mpi_ckpt)
set(_killed ${CMAKE_CURRENT_BINARY_DIR}/mpi_killed_ckpt)
set(_retain ${CMAKE_CURRENT_BINARY_DIR}/mpi_retain_ckpt)
set(_corrupt ${CMAKE_CURRENT_BINARY_DIR}/mpi_corrupt_ckpt)
set(_died ${CMAKE_CURRENT_BINARY_DIR}/mpi_died_ckpt)
set(_ps_worker ${CMAKE_CURRENT_BINARY_DIR}/ps_worker_ckpt)
set(_incr ${CMAKE_CURRENT_BINARY_DIR}/mpi_incr_ckpt)

# One MPI job at a time (RESOURCE_LOCK): two Open MPI jobs starting or
# ending together race on their shared session directory
# (/tmp/ompi.HOST.UID): "A call to mkdir was unable to create the desired
# directory ... File exists", and the job fails before any rank runs. A
# singleton (a binary run without mpirun) makes one too.
set(_mpi_lock varstate_mpi_session_dir)
function(varstate_mpi_test name)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS "mpi;cpu" TIMEOUT 60 ENVIRONMENT "${_mpi_env}"
                       RESOURCE_LOCK ${_mpi_lock})
endfunction()

varstate_mpi_test(mpi_ops ${_mpirun} -np 4 $<TARGET_FILE:mpi_test> ops)
varstate_mpi_test(mpi_sparse ${_mpirun} -np 4 $<TARGET_FILE:mpi_test> sparse)
# Fixtures: fresh directories, a checkpoint written by 4 tasks, restored
# into 3 tasks and into one process.
add_test(NAME mpi_ckpt_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${_ckpt} ${_killed} ${_retain}
                                      ${_ps_worker} ${_corrupt} ${_died} ${_incr}
                                      ${_incr}_corrupt
                                      ${CMAKE_CURRENT_BINARY_DIR}/mpi_reshard_2
                                      ${CMAKE_CURRENT_BINARY_DIR}/mpi_reshard_3
                                      ${CMAKE_CURRENT_BINARY_DIR}/mpi_reshard_4)
set_tests_properties(mpi_ckpt_clean PROPERTIES LABELS "mpi;cpu" FIXTURES_SETUP mpi_clean)
varstate_mpi_test(mpi_save ${_mpirun} -np 4 $<TARGET_FILE:mpi_test> save ${_ckpt})
set_tests_properties(mpi_save PROPERTIES FIXTURES_SETUP mpi_ckpt FIXTURES_REQUIRED mpi_clean)
varstate_mpi_test(mpi_restore_3_tasks ${_mpirun} -np 3 $<TARGET_FILE:mpi_test> restore ${_ckpt})
varstate_mpi_test(mpi_restore_1_process $<TARGET_FILE:mpi_test> check ${_ckpt})
set_tests_properties(mpi_restore_3_tasks mpi_restore_1_process PROPERTIES FIXTURES_REQUIRED mpi_ckpt)
# A task dies in the middle of a save: the job fails (WILL_FAIL), and a
# fresh process finds the previous checkpoint intact.
varstate_mpi_test(mpi_kill_during_save ${_mpirun} -np 4 $<TARGET_FILE:mpi_test> kill ${_killed})
set_tests_properties(mpi_kill_during_save PROPERTIES WILL_FAIL TRUE
                     FIXTURES_SETUP mpi_killed FIXTURES_REQUIRED mpi_clean)
varstate_mpi_test(mpi_after_kill $<TARGET_FILE:mpi_test> check_killed ${_killed})
set_tests_properties(mpi_after_kill PROPERTIES FIXTURES_REQUIRED mpi_killed)
# Then the restarted job's next save there sweeps the dead save's temporary
# folder and, its list recovered, the checkpoints beyond max_to_keep.
varstate_mpi_test(mpi_save_after_kill ${_mpirun} -np 4 $<TARGET_FILE:mpi_test> save_after_kill
                  ${_killed})
set_tests_properties(mpi_save_after_kill PROPERTIES FIXTURES_REQUIRED mpi_killed
                     DEPENDS mpi_after_kill)

# All-or-nothing restore: a corrupt shard, then a missing one.
varstate_mpi_test(mpi_corrupt_restore ${_mpirun} -np 4 $<TARGET_FILE:mpi_test> corrupt ${_corrupt})
set_tests_properties(mpi_corrupt_restore PROPERTIES FIXTURES_REQUIRED mpi_clean)

# A task dies and mpirun lets the others run on: every survivor reports an
# error naming it within 30 s (bounded by timeout), then a fresh process
# restores the last committed checkpoint.
set(_survivors "survivor ok[^\n]*\n(.*\n)?.*survivor ok[^\n]*\n(.*\n)?.*survivor ok")
foreach(_where save op create)
  varstate_mpi_test(mpi_die_in_${_where} timeout -k 5 30 ${_mpirun} --mca orte_abort_on_non_zero_status 0
                    -np 4 $<TARGET_FILE:mpi_test> die_in_${_where} ${_died})
  set_tests_properties(mpi_die_in_${_where} PROPERTIES PASS_REGULAR_EXPRESSION "${_survivors}"
                       FAIL_REGULAR_EXPRESSION "survivor FAILED;EXPECT failed")
endforeach()
# A task dies holding an owner's exclusive lock: the task waiting for that
# lock cannot be unblocked (MPI cannot cancel a lock request); its lock
# watchdog ends it with the error naming the dead task, within seconds.
varstate_mpi_test(mpi_die_holding_lock timeout -k 5 30 ${_mpirun}
                  --mca orte_abort_on_non_zero_status 0 -np 4 $<TARGET_FILE:mpi_test>
                  die_holding_lock ${_died})
set_tests_properties(mpi_die_holding_lock PROPERTIES
  PASS_REGULAR_EXPRESSION
  "MPI_Win_lock on /job:worker/task:0: waiting for the lock of /job:ps/task:0: task /job:worker/task:1 \\(rank 3"
  FAIL_REGULAR_EXPRESSION "survivor FAILED;EXPECT failed")
set_tests_properties(mpi_die_in_save PROPERTIES FIXTURES_SETUP mpi_died FIXTURES_REQUIRED mpi_clean)
varstate_mpi_test(mpi_after_death $<TARGET_FILE:mpi_test> check_killed ${_died})
set_tests_properties(mpi_after_death PROPERTIES FIXTURES_REQUIRED mpi_died)

# N -> M restore: checkpoints of 4, 2 and 3 ps tasks (tables in as many
# parts) restored into 2, 4 and 1 ps tasks, bitwise.
foreach(_pair "4;2" "2;4" "3;1")
  list(GET _pair 0 _n)
  list(GET _pair 1 _m)
  math(EXPR _np_save "${_n} + 1")
  math(EXPR _np_restore "${_m} + 1")
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/mpi_reshard_${_n})
  varstate_mpi_test(mpi_reshard_save_${_n} ${_mpirun} -np ${_np_save} $<TARGET_FILE:mpi_test>
                    reshard_save ${_dir})
  set_tests_properties(mpi_reshard_save_${_n} PROPERTIES FIXTURES_SETUP mpi_reshard_${_n}
                       FIXTURES_REQUIRED mpi_clean)
  varstate_mpi_test(mpi_reshard_${_n}_to_${_m} ${_mpirun} -np ${_np_restore}
                    $<TARGET_FILE:mpi_test> reshard_restore ${_dir})
  set_tests_properties(mpi_reshard_${_n}_to_${_m} PROPERTIES FIXTURES_REQUIRED mpi_reshard_${_n})
endforeach()

# max_to_keep across a restart; a save failing on a directory in its way.
add_test(NAME mpi_retain_mkdir COMMAND ${CMAKE_COMMAND} -E make_directory ${_retain})
set_tests_properties(mpi_retain_mkdir PROPERTIES LABELS "mpi;cpu" FIXTURES_SETUP mpi_retain_dir
                     FIXTURES_REQUIRED mpi_clean)
varstate_mpi_test(mpi_retain ${_mpirun} -np 4 $<TARGET_FILE:mpi_test> retain ${_retain})
set_tests_properties(mpi_retain PROPERTIES FIXTURES_REQUIRED mpi_retain_dir)

# The example job of docs/multi-process.md, 1 ps + 2 workers, run three times on one
# directory: each run resumes from the last (200 updates more each) and
# max_to_keep 2 leaves the last two checkpoints.
add_executable(ps_worker_example ${PROJECT_SOURCE_DIR}/examples/ps_worker/main.cc)
target_link_libraries(ps_worker_example PRIVATE varstate::varstate)
foreach(_run 1 2 3)
  math(EXPR _step "200 * ${_run}")
  varstate_mpi_test(mpi_ps_worker_example_${_run} ${_mpirun} -np 3
                    $<TARGET_FILE:ps_worker_example> ${_ps_worker})
  set(_expect "emb\\[999\\]\\[0\\] = ${_step} \\(expect ${_step}\\)")
  if(_run EQUAL 3)
    string(APPEND _expect ".*kept: ${_ps_worker}/model-400 ${_ps_worker}/model-600 \\(2 on disk\\)")
  endif()
  # Each run is the next one's fixture, so any of them runs after the ones before.
  math(EXPR _previous "${_run} - 1")
  set(_requires mpi_clean)
  if(_run GREATER 1)
    set(_requires mpi_ps_worker_${_previous})
  endif()
  set_tests_properties(mpi_ps_worker_example_${_run} PROPERTIES
                       PASS_REGULAR_EXPRESSION "${_expect}" FIXTURES_REQUIRED "${_requires}"
                       FIXTURES_SETUP mpi_ps_worker_${_run})
endforeach()

# The distributed demo (tools/cli/demo_ps.cc): 2 ps tasks + 2 workers reach
# one process's test RMSE, and resume from their DistributedSaver checkpoint.
if(TARGET varstate_cli)
  add_test(NAME mpi_demo_ps COMMAND ${CMAKE_CURRENT_LIST_DIR}/demo_ps_test.sh
                                    $<TARGET_FILE:varstate_cli> ${_mpirun})
  set_tests_properties(mpi_demo_ps PROPERTIES LABELS "mpi;cpu;cli" TIMEOUT 300
                       ENVIRONMENT "${_mpi_env}" RESOURCE_LOCK ${_mpi_lock})
endif()
# Incremental saves: a base and 2 deltas written by 2 tasks; a fresh launch
# restores the chain bitwise as a full save; a corrupt delta or a missing
# base fails on every task, nothing restored.
varstate_mpi_test(mpi_incremental_save ${_mpirun} -np 2 $<TARGET_FILE:mpi_test> incr_save ${_incr})
set_tests_properties(mpi_incremental_save PROPERTIES FIXTURES_SETUP mpi_incr
                     FIXTURES_REQUIRED mpi_clean)
varstate_mpi_test(mpi_incremental_restore
                  ${_mpirun} -np 2 $<TARGET_FILE:mpi_test> incr_restore ${_incr})
set_tests_properties(mpi_incremental_restore PROPERTIES FIXTURES_REQUIRED mpi_incr)
varstate_mpi_test(mpi_incremental_corrupt
                  ${_mpirun} -np 2 $<TARGET_FILE:mpi_test> incr_corrupt ${_incr}_corrupt)
set_tests_properties(mpi_incremental_corrupt PROPERTIES FIXTURES_REQUIRED mpi_clean)

# RestoreShare's checksum layout in one process, each task simulated.
varstate_add_test(test_distributed SOURCES ${CMAKE_CURRENT_LIST_DIR}/restore_share_test.cc)

# Training ops and optimizers on parameter-server variables
# (mpi_training_test.cc): 2 ps tasks + 2 workers.
add_executable(mpi_training_test ${CMAKE_CURRENT_LIST_DIR}/mpi_training_test.cc
                                 ${CMAKE_CURRENT_LIST_DIR}/mpi_test_util.cc)
target_link_libraries(mpi_training_test PRIVATE varstate_private MPI::MPI_C)
target_compile_definitions(mpi_training_test PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
set(_training_incr ${CMAKE_CURRENT_BINARY_DIR}/mpi_training_incr)
foreach(_mode equal concurrent errors)
  varstate_mpi_test(mpi_training_${_mode} ${_mpirun} -np 4 $<TARGET_FILE:mpi_training_test>
                    ${_mode})
endforeach()
add_test(NAME mpi_training_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${_training_incr})
set_tests_properties(mpi_training_clean PROPERTIES LABELS "mpi;cpu"
                     FIXTURES_SETUP mpi_training_clean)
varstate_mpi_test(mpi_training_incremental ${_mpirun} -np 4 $<TARGET_FILE:mpi_training_test>
                  incremental ${_training_incr})
set_tests_properties(mpi_training_incremental PROPERTIES FIXTURES_REQUIRED mpi_training_clean)

# Dynamic variables held by parameter-server tasks (mpi_dynamic_test.cc):
# their ops against a table of one process, concurrent workers, errors; a
# DistributedSaver chain of 2 ps tasks restored into 1 and into one
# process.
add_executable(mpi_dynamic_test ${CMAKE_CURRENT_LIST_DIR}/mpi_dynamic_test.cc
                                ${CMAKE_CURRENT_LIST_DIR}/mpi_test_util.cc)
target_link_libraries(mpi_dynamic_test PRIVATE varstate_private MPI::MPI_C)
target_compile_definitions(mpi_dynamic_test PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
set(_dynamic ${CMAKE_CURRENT_BINARY_DIR}/mpi_dynamic_ckpt)
varstate_mpi_test(mpi_dynamic_ops ${_mpirun} -np 4 $<TARGET_FILE:mpi_dynamic_test> ops)
add_test(NAME mpi_dynamic_clean COMMAND ${CMAKE_COMMAND} -E rm -rf ${_dynamic})
set_tests_properties(mpi_dynamic_clean PROPERTIES LABELS "mpi;cpu" FIXTURES_SETUP mpi_dynamic_clean)
varstate_mpi_test(mpi_dynamic_save ${_mpirun} -np 4 $<TARGET_FILE:mpi_dynamic_test> save ${_dynamic})
set_tests_properties(mpi_dynamic_save PROPERTIES FIXTURES_SETUP mpi_dynamic
                     FIXTURES_REQUIRED mpi_dynamic_clean)
varstate_mpi_test(mpi_dynamic_restore ${_mpirun} -np 2 $<TARGET_FILE:mpi_dynamic_test> restore
                  ${_dynamic})
varstate_mpi_test(mpi_dynamic_restore_1_process $<TARGET_FILE:mpi_dynamic_test> check ${_dynamic})
set_tests_properties(mpi_dynamic_restore mpi_dynamic_restore_1_process PROPERTIES
                     FIXTURES_REQUIRED mpi_dynamic)
