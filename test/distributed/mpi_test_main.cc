// Tests of the multi-process layer (distributed/), run by CTest
// under mpirun (test/distributed/tests.cmake). One binary (mpi_test_*.cc),
// one mode per run:
//   ops                every remote op against a local reference, errors,
//                      concurrent updates, count_up_to, partitioned
//                      variables, caching (np 4: 2 ps + 2 workers)
//   sparse             bytes on the wire of remote gathers and scatters,
//                      exchanges per partitioned op (np 4)
//   save DIR           a DistributedSaver checkpoint of a known model (np 4)
//   restore DIR        restores it into 1 ps + 2 workers, another partitioning (np 3)
//   check DIR          restores it into one process with a plain Saver (no mpirun)
//   kill DIR           saves step 1, then ps task 1 dies mid-save of step 2 (np 4)
//   check_killed DIR   the latest checkpoint is still step 1 and restores (no mpirun)
//   save_after_kill DIR  a restarted job (max_to_keep 1) recovers the list,
//                      saves step 3: the dead save's folder and step 1 go (np 4)
//   corrupt DIR        a restore from a corrupt or incomplete checkpoint fails on
//                      every task alike, naming the file; nothing changes (np 4)
//   die_in_save DIR    ps task 1 dies mid-save; the survivors get an error
//                      naming it within seconds (np 4, job not aborted)
//   die_in_op          ps task 1 is killed while workers scatter into it (np 4)
//   die_in_create      ps task 1 is killed before a variable's creation (np 4)
//   die_holding_lock   worker task 1 is killed holding ps task 0's exclusive lock (np 4)
//   reshard_save DIR   np-1 ps tasks save two tables of np-1 parts
//   reshard_restore DIR  restore them into np-1 ps tasks (another count), bitwise
//   incr_save DIR      incremental saves: a base and 2 deltas, and a full save
//                      of the same values in DIR/full (np 2)
//   incr_restore DIR   a fresh launch: the chain restores what the full save
//                      holds, bitwise (np 2)
//   incr_corrupt DIR   a corrupt delta, a missing base: every task fails alike,
//                      naming the file; nothing changes (np 2)
//   retain DIR         max_to_keep 2 across a restart (recover_last_checkpoints,
//                      set_last_checkpoints agreed on every task) and a save
//                      failing on a directory in its way (np 4)
// Failures are printed with the rank; the exit code is non-zero when any
// rank failed.
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

#include "mpi_test_util.h"

using namespace varstate::mpi_test;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ops";
  const std::string dir = argc > 2 ? argv[2] : "";
  setvbuf(stdout, nullptr, _IONBF, 0);

  // Single-process modes: no Cluster, plain Saver.
  if (mode == "check" || mode == "check_killed") {
    g_rank = 0;
    return run_check(mode, dir);
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int code = 1;
  try {
    if (mode == "ops") {
      code = run_ops();
    } else if (mode == "sparse") {
      code = run_sparse();
    } else if (mode == "die_in_save" || mode == "die_in_op" || mode == "die_in_create" ||
               mode == "die_holding_lock") {
      code = run_failure(mode, dir);
    } else if (mode == "reshard_save" || mode == "reshard_restore") {
      code = run_reshard(mode, dir);
    } else if (mode == "incr_save" || mode == "incr_restore" || mode == "incr_corrupt") {
      code = run_incremental(mode, dir);
    } else if (mode == "save" || mode == "restore" || mode == "kill" || mode == "save_after_kill" ||
               mode == "corrupt" || mode == "retain") {
      code = run_checkpoint(mode, dir);
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] uncaught: %s\n", g_rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
