// Tests of the multi-process layer (distributed/), run by CTest
// under mpirun (test/distributed/tests.cmake). One binary, one mode per
// run:
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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_chain_internal.h"
#include "checkpoint/file_system.h"
#include "checkpoint/tensor_bundle.h"
#include "distributed/cluster_internal.h"
#include "runtime/remote_storage_internal.h"
#include "varstate/varstate.h"

using namespace varstate;

namespace {

int g_rank = -1;
using Jobs = std::map<std::string, std::vector<std::string>>;
int g_failures = 0;

#define EXPECT(cond)                                                                           \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      ++g_failures;                                                                            \
      std::fprintf(stderr, "[rank %d] %s:%d: EXPECT failed: %s\n", g_rank, __FILE__, __LINE__, \
                   #cond);                                                                     \
    }                                                                                          \
  } while (0)

// Expects `f` to throw E whose message contains `text`.
template <class E>
void expect_throws(const std::function<void()>& f, const std::string& text, int line) {
  try {
    f();
  } catch (const E& e) {
    if (std::string(e.what()).find(text) == std::string::npos) {
      ++g_failures;
      std::fprintf(stderr, "[rank %d] line %d: message \"%s\" lacks \"%s\"\n", g_rank, line,
                   e.what(), text.c_str());
    }
    return;
  } catch (const std::exception& e) {
    ++g_failures;
    std::fprintf(stderr, "[rank %d] line %d: wrong exception: %s\n", g_rank, line, e.what());
    return;
  }
  ++g_failures;
  std::fprintf(stderr, "[rank %d] line %d: no exception (expected \"%s\")\n", g_rank, line,
               text.c_str());
}
#define EXPECT_THROWS(E, stmt, text) expect_throws<E>([&] { stmt; }, text, __LINE__)

bool same(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to_host(), y = b.to_host();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

template <class T>
Tensor make(std::vector<int64_t> dims, const std::function<T(int64_t)>& f) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = f(i);
  return Tensor::from_vector<T>(v, TensorShape(std::move(dims)));
}

Tensor i64(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v); }

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int finish(Cluster* cluster) {
  int failures = g_failures, total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (cluster) cluster->shutdown();
  if (g_rank == 0)
    std::printf("%s: %d failure(s) over all ranks\n", total ? "FAILED" : "passed", total);
  return total == 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------
// ops: 2 ps + 2 workers

void test_ops(Cluster& cluster, std::vector<Variable>& keep) {
  const bool chief = cluster.is_chief();
  EXPECT(cluster.size() == 4);
  EXPECT(cluster.job_name() == (cluster.rank() < 2 ? "ps" : "worker"));
  EXPECT(cluster.task_index() == cluster.rank() % 2);
  EXPECT(chief == (cluster.rank() == 2));
  EXPECT(cluster.rank_of("ps", 1) == 1 && cluster.rank_of("worker", 1) == 3);
  EXPECT(cluster.task_name_of_rank(3) == "/job:worker/task:1");
  EXPECT_THROWS(NotFoundError, cluster.rank_of("ps", 2), "/job:ps/task:2");
  // A job's barrier: only its tasks take part (the ps tasks pass theirs
  // while the workers are in their own, twice).
  for (int k = 0; k < 2; ++k) cluster.barrier(cluster.job_name());
  EXPECT_THROWS(InvalidArgumentError, cluster.barrier(cluster.job_name() == "ps" ? "worker" : "ps"),
                "a task joins the barrier of its own job only");
  cluster.barrier();

  const Tensor a0 =
      make<float>({6, 4}, [](int64_t i) { return static_cast<float>(i) * 0.5f - 3.f; });
  const Tensor b0 =
      make<int32_t>({5, 3}, [](int64_t i) { return static_cast<int32_t>(i * 7 - 40); });
  // Local references: no device scope, so they stay in this process.
  Variable a_ref(a0, {.name = "a_ref"});
  Variable b_ref(b0, {.name = "b_ref"});
  Session().run(std::vector<Op>{a_ref.initializer(), b_ref.initializer()});
  EXPECT(internal::remote_storage(a_ref) == nullptr);

  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Variable a(a0, {.name = "a"});                                            // ps 0
  Variable b(b0, {.name = "b"});                                            // ps 1
  Variable counter(Tensor(int64_t{0}), {.name = "counter"});                // ps 0
  Variable total(Tensor::zeros(DType::kFloat, {8, 4}), {.name = "total"});  // ps 1
  Variable sum(Tensor(int64_t{0}), {.name = "sum"});                        // ps 0
  Variable cached(Tensor({1.f, 2.f, 3.f}),
                  {.caching_device = "/device:CPU:0", .name = "cached"});  // ps 1
  Variable never(Tensor({1.f, 2.f}), {.name = "never"});  // ps 0, never initialized
  keep.push_back(a);
  EXPECT(a.placement().find("/job:ps/task:0") == 0);
  EXPECT(b.placement().find("/job:ps/task:1") == 0);
  EXPECT(internal::remote_storage(a) != nullptr);
  EXPECT(!a.is_initialized());
  EXPECT_THROWS(FailedPreconditionError, a.value(), "uninitialized value a");
  cluster.barrier();
  if (chief) {
    Session().run(std::vector<Op>{a.initializer(), b.initializer(), counter.initializer(),
                                  total.initializer(), sum.initializer(), cached.initializer()});
  }
  cluster.barrier();
  EXPECT(a.is_initialized() && b.is_initialized() && !never.is_initialized());
  EXPECT(same(a.value(), a0) && same(b.value(), b0));

  EXPECT(same(a.eval(Session()), a0));
  cluster.barrier();

  // Every op, applied by the chief to the remote variables and by every
  // task to its local references; then every task compares.
  int step = 0;
  auto run = [&](const std::function<Tensor(Variable&, Variable&)>& op) {
    ++step;
    if (chief) {
      const Tensor got = op(a, b);
      const Tensor want = op(a_ref, b_ref);
      if (!same(got, want)) {
        ++g_failures;
        std::fprintf(stderr, "[rank %d] step %d: returned value differs from the reference\n",
                     g_rank, step);
      }
    } else {
      op(a_ref, b_ref);
    }
    cluster.barrier();
    if (!same(a.value(), a_ref.value()) || !same(b.value(), b_ref.value())) {
      ++g_failures;
      std::fprintf(stderr, "[rank %d] step %d: remote value differs from the reference\n", g_rank,
                   step);
    }
    cluster.barrier();
  };
  const Tensor rows4 = make<float>({3, 4}, [](int64_t i) { return static_cast<float>(i) - 5.f; });
  run([&](Variable& x, Variable&) {
    return x.assign(make<float>({6, 4}, [](int64_t i) { return 1.f + i; }));
  });
  run([&](Variable& x, Variable&) { return x.assign_sub(Tensor(2.5f)); });  // scalar broadcast
  run([&](Variable& x, Variable&) {
    return x.assign_add(make<float>({6, 4}, [](int64_t i) { return i * 0.25f; }));
  });
  run([&](Variable& x, Variable&) { return x.assign_sub(Tensor(0.75f)); });
  run([&](Variable&, Variable& y) { return y.assign_add(Tensor(3)); });
  run([&](Variable& x, Variable&) {
    return scatter_update(x, i64({1, 3, 1}), rows4);
  });  // duplicate: last wins
  run([&](Variable& x, Variable&) { return scatter_add(x, i64({0, 5, 0}), rows4); });
  run([&](Variable& x, Variable&) { return scatter_sub(x, i64({4, 4, 2}), rows4); });
  run([&](Variable& x, Variable&) { return scatter_mul(x, i64({2, 3, 2}), Tensor(2.f)); });
  run([&](Variable& x, Variable&) { return scatter_div(x, i64({5}), Tensor(4.f)); });
  run([&](Variable& x, Variable&) { return scatter_min(x, i64({0, 1, 0}), rows4); });
  run([&](Variable& x, Variable&) { return scatter_max(x, i64({3, 3, 5}), rows4); });
  run([&](Variable& x, Variable&) {
    return x.scatter_add(
        IndexedSlices(make<float>({2, 4}, [](int64_t i) { return 1.f * i; }), i64({2, 2})));
  });
  const Tensor div3 =
      Tensor::from_vector<int32_t>({3, -2, 5, 7, 7, 7, -1, 2, 3}, TensorShape({3, 3}));
  run([&](Variable&, Variable& y) {
    return scatter_div(y, Tensor({0, 2, 0}), div3);
  });  // int32: exact
  run([&](Variable&, Variable& y) { return scatter_min(y, Tensor({1, 4, 1}), div3); });
  run([&](Variable&, Variable& y) { return scatter_max(y, Tensor({3, 3, 0}), div3); });
  run([&](Variable&, Variable& y) {
    return scatter_add(y, Tensor({0, 1}), Tensor(5));
  });  // scalar update
  run([&](Variable&, Variable& y) {
    return y.scatter_sub(IndexedSlices(div3, Tensor({4, 4, 4})));
  });
  run([&](Variable& x, Variable&) {
    return x.slice({Slice::range(1, 3)}).assign(make<float>({2, 4}, [](int64_t i) {
      return -1.f * i;
    }));
  });

  // Errors: raised before anything is sent, the variable unchanged.
  if (chief) {
    const Tensor before = a.value();
    const uint64_t version = a.version();
    EXPECT_THROWS(InvalidArgumentError, scatter_add(a, i64({0, 6}), Tensor(1.f)),
                  "indices[1] = 6 is not in [0, 6)");
    EXPECT_THROWS(InvalidArgumentError,
                  scatter_update(a, i64({-1}), Tensor::zeros(DType::kFloat, {1, 4})),
                  "indices[0] = -1 is not in [0, 6)");
    EXPECT_THROWS(ValueError, scatter_add(a, i64({0, 1}), rows4), "updates shape");
    EXPECT_THROWS(ValueError, a.assign(Tensor::zeros(DType::kFloat, {2, 2})), "shapes must match");
    EXPECT_THROWS(ValueError, a.assign(Tensor(1.f)), "shapes must match");
    EXPECT_THROWS(ValueError, a.assign_add(Tensor::zeros(DType::kFloat, {2, 2})),
                  "shapes must match");
    EXPECT_THROWS(TypeError, a.count_up_to(5), "dtype must be int32 or int64");
    EXPECT_THROWS(TypeError, scatter_add(a, Tensor({0.5f}), Tensor(1.f)),
                  "indices must be int32 or int64");
    EXPECT(a.version() == version);
    EXPECT(same(a.value(), before));
    const Tensor b_before = b.value();
    EXPECT_THROWS(InvalidArgumentError,
                  scatter_div(b, Tensor({0, 1}), Tensor::zeros(DType::kInt32, {2, 3})),
                  "updates[0,0] is 0");
    EXPECT(same(b.value(), b_before));
    EXPECT_THROWS(FailedPreconditionError, never.value(), "uninitialized value never");
    EXPECT_THROWS(FailedPreconditionError, scatter_add(never, i64({0}), Tensor(1.f)),
                  "uninitialized value never");
    EXPECT_THROWS(FailedPreconditionError, never.assign_add(Tensor(1.f)),
                  "uninitialized value never");
    // count_up_to: the value before, then OutOfRangeError at the limit.
    EXPECT(counter.count_up_to(2).scalar<int64_t>() == 0);
    EXPECT(counter.count_up_to(2).scalar<int64_t>() == 1);
    EXPECT_THROWS(OutOfRangeError, counter.count_up_to(2), "Reached limit of 2");
    EXPECT(counter.value().scalar<int64_t>() == 2);
  }
  // What remote variables do not do: a clear UnimplementedError naming
  // the variable (every task: no window is created).
  {
    EXPECT_THROWS(UnimplementedError, Variable(Tensor("s"), {.name = "text"}),
                  "variable \"text\" is placed on /job:ps/task:");
    EXPECT_THROWS(UnimplementedError,
                  a.assign(Tensor::zeros(DType::kFloat, {7, 4}), {.validate_shape = false}),
                  "variable \"a\" on /job:ps/task:0 cannot change shape (validate_shape=False)");
  }
  // A placement naming a task the cluster lacks (every task: no window is
  // created, so the collective order stays intact).
  {
    DeviceScope nowhere("/job:ps/task:7");
    EXPECT_THROWS(NotFoundError, Variable(Tensor(1.f), {.name = "lost"}), "/job:ps/task:7");
  }
  {
    DeviceScope nowhere("/job:chief/task:0");
    EXPECT_THROWS(NotFoundError, Variable(Tensor(1.f), {.name = "lost"}),
                  "not a task of the cluster");
  }
  cluster.barrier();

  // Caching device: one copy per change of the owner's value.
  if (chief) {
    EXPECT(same(cached.value(), Tensor({1.f, 2.f, 3.f})));
    EXPECT(same(cached.value(), Tensor({1.f, 2.f, 3.f})));
    EXPECT(cached.cache_copies() == 1);
  }
  cluster.barrier();
  if (cluster.rank() == 3) cached.assign_add(Tensor(1.f));
  cluster.barrier();
  if (chief) {
    EXPECT(same(cached.value(), Tensor({2.f, 3.f, 4.f})));
    EXPECT(cached.value().valid());
    EXPECT(cached.cache_copies() == 2);
  }

  // Concurrency: every task scatter_adds and assign_adds at once.
  constexpr int kIters = 60;
  const int r = cluster.rank();
  for (int i = 0; i < kIters; ++i) {
    scatter_add(total, i64({r % 8, (r + i) % 8, 0}), Tensor(static_cast<float>(r + 1)));
    sum.assign_add(Tensor(int64_t{1}));
  }
  cluster.barrier();
  std::vector<float> want(32, 0.f);
  for (int rank = 0; rank < 4; ++rank) {
    for (int i = 0; i < kIters; ++i) {
      for (int row : {rank % 8, (rank + i) % 8, 0}) {
        for (int c = 0; c < 4; ++c)
          want[static_cast<size_t>(row * 4 + c)] += static_cast<float>(rank + 1);
      }
    }
  }
  EXPECT(same(total.value(), Tensor::from_vector<float>(want, TensorShape({8, 4}))));
  EXPECT(sum.value().scalar<int64_t>() == 4 * kIters);

  // count_up_to under contention: every value handed out exactly once.
  Variable ticket(Tensor(int64_t{0}), {.name = "ticket"});
  if (chief) Session().run(ticket.initializer());
  cluster.barrier();
  constexpr int64_t kLimit = 120;
  std::vector<int64_t> mine;
  for (;;) {
    try {
      mine.push_back(ticket.count_up_to(kLimit).scalar<int64_t>());
    } catch (const OutOfRangeError&) {
      break;
    }
  }
  int count = static_cast<int>(mine.size());
  std::vector<int> counts(4), displs(4);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  std::vector<int64_t> all(static_cast<size_t>(displs[3] + counts[3]));
  MPI_Allgatherv(mine.data(), count, MPI_INT64_T, all.data(), counts.data(), displs.data(),
                 MPI_INT64_T, MPI_COMM_WORLD);
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kLimit);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT(all == expected);

  // A partitioned variable over both ps tasks: each scatter is one
  // exchange per part (each part's version moves by one).
  PartitionedVariable emb = get_variable("emb", {.shape = {10, 3},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(2)});
  EXPECT(emb.size() == 2);
  EXPECT(emb[0].placement().substr(0, 14) != emb[1].placement().substr(0, 14));
  if (chief) Session().run(emb.initializer());
  cluster.barrier();
  if (chief) {
    const uint64_t v0 = emb[0].version(), v1 = emb[1].version();
    emb.scatter_add(i64({1, 8, 1, 9, 4}), Tensor(1.f));
    EXPECT(emb[0].version() == v0 + 1 && emb[1].version() == v1 + 1);
    emb.scatter_sub(i64({1, 8, 1, 9, 4}), Tensor(1.f));
    EXPECT_THROWS(InvalidArgumentError, emb.scatter_add(i64({2, 10}), Tensor(1.f)),
                  "indices[1] = 10 is not in [0, 10)");
    EXPECT(emb[0].version() == v0 + 2 && emb[1].version() == v1 + 2);
  }
  cluster.barrier();
  for (int i = 0; i < 20; ++i) {
    const Tensor rows =
        make<float>({4, 3}, [&](int64_t k) { return static_cast<float>(r + k % 3); });
    emb.scatter_add(i64({r, 9 - r, 4, 4}), rows);
  }
  cluster.barrier();
  std::vector<float> emb_want(30, 0.f);
  for (int rank = 0; rank < 4; ++rank) {
    const int64_t rows_of[4] = {rank, 9 - rank, 4, 4};
    for (int i = 0; i < 20; ++i) {
      for (int p = 0; p < 4; ++p) {
        for (int c = 0; c < 3; ++c)
          emb_want[static_cast<size_t>(rows_of[p] * 3 + c)] += static_cast<float>(rank + c);
      }
    }
  }
  EXPECT(same(emb.as_tensor(), Tensor::from_vector<float>(emb_want, TensorShape({10, 3}))));
  cluster.barrier();
}

// ---------------------------------------------------------------------------
// sparse: bytes on the wire and exchanges per op (2 ps + 2 workers)

// Traffic of this process during `f`.
internal::WireStats traffic(Cluster& cluster, const std::function<void()>& f) {
  const internal::WireStats before = internal::ClusterAccess::wire_stats(cluster);
  f();
  const internal::WireStats after = internal::ClusterAccess::wire_stats(cluster);
  return {after.exchanges - before.exchanges, after.data_bytes - before.data_bytes,
          after.index_bytes - before.index_bytes, after.header_bytes - before.header_bytes};
}

#define EXPECT_EQ_U(a, b)                                                                   \
  do {                                                                                      \
    const uint64_t x_ = (a), y_ = (b);                                                      \
    if (x_ != y_) {                                                                         \
      ++g_failures;                                                                         \
      std::fprintf(stderr, "[rank %d] %s:%d: %s = %llu, expected %llu\n", g_rank, __FILE__, \
                   __LINE__, #a, static_cast<unsigned long long>(x_),                       \
                   static_cast<unsigned long long>(y_));                                    \
    }                                                                                       \
  } while (0)

// A remote gather / scatter of a few rows of a big table moves those rows
// (distinct ones, once) and their offsets, in one exchange.
void test_row_traffic(Cluster& cluster) {
  constexpr int64_t kRows = 4096, kWidth = 16;
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Variable table(make<float>({kRows, kWidth}, [](int64_t i) { return static_cast<float>(i % 97); }),
                 {.name = "table"});
  if (cluster.is_chief()) Session().run(table.initializer());
  cluster.barrier();
  if (cluster.is_chief()) {
    const Tensor ids = i64({7, 4095, 7, 100, 7});  // 3 distinct rows
    constexpr uint64_t kRowBytes = kWidth * 4;
    EXPECT(table.is_initialized());
    Tensor got;
    internal::WireStats t = traffic(cluster, [&] { got = gather(table, ids); });
    EXPECT_EQ_U(t.exchanges, 1);
    EXPECT_EQ_U(t.data_bytes, 3 * kRowBytes);
    EXPECT_EQ_U(t.index_bytes, 3 * 8);
    EXPECT_EQ_U(t.header_bytes, 0);
    EXPECT(got.shape() == TensorShape({5, kWidth}));
    EXPECT(got.to_vector<float>()[kWidth * 1] == static_cast<float>(4095 * kWidth % 97));
    // The duplicates of a scatter_add are combined before they travel.
    const Tensor rows =
        Tensor::filled(DType::kFloat, {5, kWidth}, Tensor(1.f), DeviceManager::instance().cpu());
    t = traffic(cluster, [&] { scatter_add(table, ids, rows); });
    // The returned value of a single-variable scatter is a read of the whole.
    EXPECT_EQ_U(t.data_bytes, 3 * kRowBytes + kRows * kRowBytes);
    EXPECT_EQ_U(t.exchanges, 2);
    EXPECT_EQ_U(t.index_bytes, 3 * 8);
    EXPECT(gather(table, i64({7})).to_vector<float>()[0] ==
           static_cast<float>(7 * kWidth % 97) + 3.f);
  }
  cluster.barrier();
}

// A partitioned variable of 8 parts on 2 ps tasks: every sparse op is one
// exchange per owner (2), and matches the same op on a local copy.
void test_exchanges_per_owner(Cluster& cluster) {
  const Tensor init =
      make<float>({40, 3}, [](int64_t i) { return 1.f + static_cast<float>(i % 7); });
  const Tensor init_i =
      make<int32_t>({40, 3}, [](int64_t i) { return static_cast<int32_t>(i * 5 + 9); });
  PartitionedVariable local =
      get_variable("sp_local", {.initializer = init, .partitioner = fixed_size_partitioner(8)});
  PartitionedVariable local_i =
      get_variable("sp_local_i", {.initializer = init_i, .partitioner = fixed_size_partitioner(8)});
  Session().run(std::vector<Op>{local.initializer(), local_i.initializer()});
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  PartitionedVariable emb =
      get_variable("sp", {.initializer = init, .partitioner = fixed_size_partitioner(8)});
  PartitionedVariable emb_i =
      get_variable("sp_i", {.initializer = init_i, .partitioner = fixed_size_partitioner(8)});
  std::vector<int> owners(2, 0);
  for (const Variable& part : emb.variables()) {
    const int owner = internal::ClusterAccess::owner_rank(part);
    EXPECT(owner == 0 || owner == 1);
    if (owner == 0 || owner == 1) ++owners[static_cast<size_t>(owner)];
  }
  EXPECT(owners[0] == 4 && owners[1] == 4);
  if (cluster.is_chief()) Session().run(std::vector<Op>{emb.initializer(), emb_i.initializer()});
  cluster.barrier();
  if (cluster.is_chief()) {
    EXPECT(same(emb.as_tensor(), init));
    const Tensor ids = i64({0, 39, 5, 5, 17, 22, 31, 8, 0});  // every part, duplicates
    const Tensor rows = make<float>({9, 3}, [](int64_t i) { return 0.5f + static_cast<float>(i); });
    using PartOp =
        void (PartitionedVariable::*)(const Tensor&, const Tensor&, const UpdateOptions&);
    const std::vector<std::pair<const char*, PartOp>> ops = {
        {"scatter_update", &PartitionedVariable::scatter_update},
        {"scatter_add", &PartitionedVariable::scatter_add},
        {"scatter_sub", &PartitionedVariable::scatter_sub},
        {"scatter_mul", &PartitionedVariable::scatter_mul},
        {"scatter_div", &PartitionedVariable::scatter_div},
        {"scatter_min", &PartitionedVariable::scatter_min},
        {"scatter_max", &PartitionedVariable::scatter_max}};
    for (const auto& [name, op] : ops) {
      const internal::WireStats t = traffic(cluster, [&] { (emb.*op)(ids, rows, {}); });
      (local.*op)(ids, rows, {});
      if (t.exchanges != 2 || !same(emb.as_tensor(), local.as_tensor())) {
        ++g_failures;
        std::fprintf(stderr, "[rank %d] %s: %llu exchanges (expected 2), values %s\n", g_rank, name,
                     static_cast<unsigned long long>(t.exchanges),
                     same(emb.as_tensor(), local.as_tensor()) ? "equal" : "differ");
      }
    }
    // int32 division: exact, read-modify-write under the exclusive lock.
    const Tensor div =
        make<int32_t>({9, 3}, [](int64_t i) { return static_cast<int32_t>(i % 4 + 1); });
    const internal::WireStats t = traffic(cluster, [&] { emb_i.scatter_div(ids, div); });
    local_i.scatter_div(ids, div);
    EXPECT_EQ_U(t.exchanges, 2);
    EXPECT(same(emb_i.as_tensor(), local_i.as_tensor()));
    Tensor got;
    const internal::WireStats g = traffic(cluster, [&] { got = gather(emb, ids); });
    EXPECT_EQ_U(g.exchanges, 2);
    EXPECT_EQ_U(g.data_bytes, 7 * 3 * 4);  // 7 distinct rows
    EXPECT(same(got, gather(local, ids)));
    EXPECT(same(gather(emb, i64({3})), gather(local, i64({3}))));  // one part: one exchange
  }
  cluster.barrier();
}

// ---------------------------------------------------------------------------
// The checkpointed model: its variables and their known values.

Tensor w_value() {
  return make<float>({6, 4}, [](int64_t i) { return static_cast<float>(i) + 0.5f; });
}
Tensor emb_value() {
  return make<float>({10, 3}, [](int64_t i) { return static_cast<float>(100 * (i / 3) + i % 3); });
}

struct Model {
  Variable w;
  PartitionedVariable emb;
  Variable step;
};

Model build_model(int emb_parts) {
  Variable w(Tensor::zeros(DType::kFloat, {6, 4}), {.name = "w"});
  PartitionedVariable emb = get_variable("emb", {.shape = {10, 3},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(emb_parts)});
  Variable step(Tensor(int64_t{0}), {.name = "global_step"});
  return {w, emb, step};
}

void set_model(Model& m, int64_t step) {
  m.w.assign(w_value());
  m.emb.assign(emb_value());
  m.step.assign(Tensor(step));
}

void check_model(const Model& m, int64_t step) {
  EXPECT(same(m.w.value(), w_value()));
  EXPECT(same(m.emb.as_tensor(), emb_value()));
  EXPECT(m.step.value().scalar<int64_t>() == step);
}

// A FileSystem that ends the process after `limit` data bytes of a shard:
// a task dying in the middle of writing its part of a checkpoint.
class DyingFileSystem : public FileSystem {
 public:
  explicit DyingFileSystem(size_t limit) : limit_(limit) {}
  bool armed = false;
  std::unique_ptr<WritableFile> new_writable_file(const std::string& path) override {
    auto inner = base().new_writable_file(path);
    if (!armed || path.find(".data-") == std::string::npos) return inner;
    return std::make_unique<Dying>(std::move(inner), limit_);
  }
  std::unique_ptr<RandomAccessFile> new_random_access_file(const std::string& p) override {
    return base().new_random_access_file(p);
  }
  bool file_exists(const std::string& p) override { return base().file_exists(p); }
  uint64_t file_size(const std::string& p) override { return base().file_size(p); }
  void delete_file(const std::string& p) override { base().delete_file(p); }
  void rename_file(const std::string& a, const std::string& b) override {
    base().rename_file(a, b);
  }
  std::vector<std::string> list_dir(const std::string& d) override { return base().list_dir(d); }
  void create_dir(const std::string& d) override { base().create_dir(d); }
  void delete_dir(const std::string& d) override { base().delete_dir(d); }
  void sync_dir(const std::string& d) override { base().sync_dir(d); }

 private:
  static FileSystem& base() { return *default_file_system(); }
  class Dying : public WritableFile {
   public:
    Dying(std::unique_ptr<WritableFile> inner, size_t limit)
        : inner_(std::move(inner)), left_(limit) {}
    void append(const void* data, size_t n) override {
      if (n >= left_) {
        inner_->append(data, left_);
        inner_->sync();
        std::fprintf(stderr, "[rank %d] dying mid-save, as the test asks\n", g_rank);
        _exit(3);
      }
      left_ -= n;
      inner_->append(data, n);
    }
    void sync() override { inner_->sync(); }
    void close() override { inner_->close(); }
    const std::string& path() const override { return inner_->path(); }

   private:
    std::unique_ptr<WritableFile> inner_;
    size_t left_;
  };
  size_t limit_;
};

// Flips one byte of `path` at `offset`.
void corrupt_byte(const std::string& path, long offset) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  EXPECT(f != nullptr);
  if (!f) return;
  std::fseek(f, offset, SEEK_SET);
  const int c = std::fgetc(f);
  std::fseek(f, offset, SEEK_SET);
  std::fputc(c ^ 0x5a, f);
  std::fclose(f);
}

// A checkpoint whose shard of ps task 1 is corrupt, then one missing a
// shard: restore fails on every task with the same error naming the file,
// and no task's variables change.
void test_corrupt_restore(Cluster& cluster, Model& m, const std::string& dir) {
  DistributedSaver saver(cluster);
  if (cluster.is_chief()) set_model(m, 7);
  cluster.barrier();
  const std::string path = saver.save(dir + "/model", 7);
  const std::string shard1 = path + ".data-00001-of-00002";
  const std::string shard0 = path + ".data-00000-of-00002";
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);
    m.w.assign(Tensor::zeros(DType::kFloat, {6, 4}));
    m.emb.assign(Tensor::zeros(DType::kFloat, {10, 3}));
    m.step.assign(Tensor(int64_t{9}));
  }
  cluster.barrier();
  auto unchanged = [&] {
    EXPECT(same(m.w.value(), Tensor::zeros(DType::kFloat, {6, 4})));
    EXPECT(same(m.emb.as_tensor(), Tensor::zeros(DType::kFloat, {10, 3})));
    EXPECT(m.step.value().scalar<int64_t>() == 9);
  };
  EXPECT_THROWS(AbortedError, saver.restore(path), "/job:ps/task:1, no variable changed");
  EXPECT_THROWS(AbortedError, saver.restore(path), shard1);
  unchanged();
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);  // repaired
    default_file_system()->delete_file(shard0);
  }
  cluster.barrier();
  EXPECT_THROWS(AbortedError, saver.restore(path), shard0);
  unchanged();
  cluster.barrier();
}

// ---------------------------------------------------------------------------
// A task dying under a job that lets the others run on (mpirun --mca
// orte_abort_on_non_zero_status 0): every survivor gets an UnavailableError
// naming the dead task within seconds, prints "survivor ok", and exits
// without finalizing MPI (which would wait for the dead task).

double seconds_since(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

[[noreturn]] void survive(Cluster& cluster, const std::string& error, double seconds) {
  EXPECT(error.find("task /job:ps/task:1 (rank 1") != std::string::npos);
  EXPECT(error.find("has exited") != std::string::npos);
  EXPECT(seconds < 30);
  cluster.shutdown();  // local only: a task has died
  std::fprintf(stderr, "[rank %d] survivor %s after %.1f s: %s\n", g_rank,
               g_failures ? "FAILED" : "ok", seconds, error.c_str());
  // mpirun ends the job once a process exits without finalizing: give the
  // other survivors (each noticing within ~0.2 s) time to report first.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  std::_Exit(g_failures ? 1 : 0);
}

// ps task 1 dies in the middle of writing its shard of step 2.
void die_in_save(Cluster& cluster, const std::string& dir) {
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Model m = build_model(2);
  DyingFileSystem dying(/*limit=*/24);
  DistributedSaver saver(cluster, {.file_system = cluster.rank() == 1 ? &dying : nullptr});
  if (cluster.is_chief()) set_model(m, 1);
  cluster.barrier();
  saver.save(dir + "/model", 1);
  dying.armed = true;
  cluster.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    saver.save(dir + "/model", 2);
  } catch (const UnavailableError& e) {
    survive(cluster, e.what(), seconds_since(t0));
  }
  EXPECT(false);  // the save cannot succeed without ps task 1
}

// ps task 1 is killed (SIGKILL) while the workers scatter into its
// variable and ps task 0 waits in join().
void die_in_op(Cluster& cluster) {
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Variable a(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "a"});  // ps 0
  Variable b(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "b"});  // ps 1
  if (cluster.is_chief()) Session().run(std::vector<Op>{a.initializer(), b.initializer()});
  cluster.barrier();
  if (cluster.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::fprintf(stderr, "[rank 1] killing itself mid-operation, as the test asks\n");
    raise(SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (cluster.job_name() == "ps") cluster.join();
    while (seconds_since(t0) < 60) scatter_add(b, i64({1, 2, 1}), Tensor(1.f));
  } catch (const UnavailableError& e) {
    survive(cluster, e.what(), seconds_since(t0));
  }
  EXPECT(false);
}

// ps task 1 dies before the tasks create a variable together: the
// creation (collective) raises naming it rather than waiting for it.
void die_in_create(Cluster& cluster) {
  if (cluster.rank() == 1) {
    std::fprintf(stderr, "[rank 1] killing itself before a creation, as the test asks\n");
    raise(SIGKILL);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
    Variable a(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "a"});
  } catch (const UnavailableError& e) {
    EXPECT(std::string(e.what()).find("creating \"a\"") != std::string::npos);
    survive(cluster, e.what(), seconds_since(t0));
  }
  EXPECT(false);
}

// worker task 1 dies holding ps task 0's exclusive lock (an assign), as
// worker task 0 keeps updating a variable there: worker 0's lock request
// can never be granted, and its lock watchdog ends it within seconds with
// the error naming the dead task; the ps tasks notice in join().
void die_holding_lock(Cluster& cluster) {
  DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
  Variable a(Tensor::zeros(DType::kFloat, {64, 8}), {.name = "a"});  // ps 0
  if (cluster.is_chief()) Session().run(std::vector<Op>{a.initializer()});
  cluster.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  if (cluster.rank() == 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    internal::set_epoch_locked_hook([](int lock_type, int) {
      if (lock_type != MPI_LOCK_EXCLUSIVE) return;
      std::fprintf(stderr, "[rank 3] killing itself holding ps task 0's lock, as the test asks\n");
      raise(SIGKILL);
    });
    a.assign(Tensor::zeros(DType::kFloat, {64, 8}));
  }
  try {
    if (cluster.job_name() == "ps") cluster.join();
    while (seconds_since(t0) < 60) scatter_add(a, i64({1, 2, 1}), Tensor(1.f));
  } catch (const UnavailableError& e) {
    const std::string error = e.what();
    EXPECT(error.find("task /job:worker/task:1 (rank 3") != std::string::npos);
    cluster.shutdown();
    std::fprintf(stderr, "[rank %d] survivor %s after %.1f s: %s\n", g_rank,
                 g_failures ? "FAILED" : "ok", seconds_since(t0), error.c_str());
    std::this_thread::sleep_for(std::chrono::seconds(2));
    std::_Exit(g_failures ? 1 : 0);
  }
  EXPECT(false);
}

// ---------------------------------------------------------------------------
// reshard: a checkpoint written by N ps tasks (tables in N parts) restores
// into M ps tasks (M parts), bitwise; each task reads only its slices.

Tensor reshard_floats() {
  return make<float>({1000, 8}, [](int64_t i) { return static_cast<float>(i) * 0.37f - 11.f; });
}
Tensor reshard_ints() {
  return make<int64_t>({257, 3}, [](int64_t i) { return i * 1000003 - 7; });
}

struct Resharded {
  PartitionedVariable floats, ints;
};

// Under a Cluster of np ranks: np-1 ps tasks, the tables in np-1 parts.
Resharded reshard_model(Cluster& cluster) {
  const int ps = cluster.num_tasks("ps");
  DeviceScope scope(replica_device_setter({.ps_tasks = ps}));
  return {get_variable("floats", {.shape = {1000, 8},
                                  .initializer = zeros_initializer(),
                                  .partitioner = fixed_size_partitioner(ps)}),
          get_variable("ints", {.shape = {257, 3},
                                .dtype = DType::kInt64,
                                .initializer = zeros_initializer(DType::kInt64),
                                .partitioner = fixed_size_partitioner(ps)})};
}

void reshard(Cluster& cluster, const std::string& mode, const std::string& dir) {
  Resharded m = reshard_model(cluster);
  if (cluster.is_chief())
    Session().run(std::vector<Op>{m.floats.initializer(), m.ints.initializer()});
  cluster.barrier();
  DistributedSaver saver(cluster);
  if (mode == "reshard_save") {
    if (cluster.is_chief()) {
      m.floats.assign(reshard_floats());
      m.ints.assign(reshard_ints());
    }
    cluster.barrier();
    saver.save(dir + "/model", 1);
    return;
  }
  saver.restore(dir + "/model-1");
  EXPECT(same(m.floats.as_tensor(), reshard_floats()));
  EXPECT(same(m.ints.as_tensor(), reshard_ints()));
  // A corrupt byte in the last stored piece of the first data file (the
  // ints' last rows, restored by the task after that piece's verifier when
  // the tasks split it): every task fails, nothing changes.
  std::string data;
  for (const std::string& name : default_file_system()->list_dir(dir)) {
    if (name.rfind("model-1.data-00000-of-", 0) == 0) data = dir + "/" + name;
  }
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(data, static_cast<long>(default_file_system()->file_size(data)) - 1);
    m.ints.assign(Tensor::zeros(DType::kInt64, {257, 3}));
  }
  cluster.barrier();
  EXPECT_THROWS(AbortedError, saver.restore(dir + "/model-1"), "crc32c mismatch");
  EXPECT(same(m.ints.as_tensor(), Tensor::zeros(DType::kInt64, {257, 3})));
  EXPECT(same(m.floats.as_tensor(), reshard_floats()));
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(data, static_cast<long>(default_file_system()->file_size(data)) - 1);
  }
  cluster.barrier();
}

// Entries of `dir` holding "_temp_", and checkpoint indexes in it.
int temporaries(const std::string& dir) {
  int n = 0;
  for (const std::string& name : default_file_system()->list_dir(dir))
    n += name.find("_temp_") != std::string::npos;
  return n;
}
int indexes(const std::string& dir) {
  int n = 0;
  for (const std::string& name : default_file_system()->list_dir(dir))
    n += name.ends_with(".index") ? 1 : 0;
  return n;
}

// Two "jobs" with max_to_keep 2 on one directory: the second recovers the
// first's list, so 2 checkpoints remain, not 4. Then a save whose index
// path is a directory fails on every task and leaves nothing new.
void test_retention(Cluster& cluster, const std::string& dir) {
  auto path = [&](int step) { return dir + "/model-" + std::to_string(step); };
  {
    DistributedSaver first(cluster, {.max_to_keep = 2});
    for (int step = 1; step <= 3; ++step) first.save(dir + "/model", step);
    EXPECT(first.last_checkpoints() == (std::vector<std::string>{path(2), path(3)}));
  }
  DistributedSaver second(cluster, {.max_to_keep = 2});
  // Rank 0's list wins, and every task agrees on it.
  second.set_last_checkpoints({path(100 + cluster.rank())});
  EXPECT(second.last_checkpoints() == std::vector<std::string>{path(100)});
  const std::optional<CheckpointState> state = get_checkpoint_state(dir);
  EXPECT(state.has_value());
  std::vector<std::string> listed =
      state ? state->all_model_checkpoint_paths : std::vector<std::string>{};
  listed.insert(listed.begin(), path(0));  // listed but gone: dropped
  second.recover_last_checkpoints(listed);
  EXPECT(second.last_checkpoints() == (std::vector<std::string>{path(2), path(3)}));
  for (int step = 4; step <= 5; ++step) second.save(dir + "/model", step);
  if (cluster.is_chief()) {
    EXPECT(indexes(dir) == 2);
    EXPECT(default_file_system()->file_exists(path(4) + ".index"));
    EXPECT(default_file_system()->file_exists(path(5) + ".index"));
  }
  cluster.barrier();

  // A directory where the index goes: every task fails, naming it on rank 0.
  if (cluster.is_chief()) default_file_system()->create_dir(path(6) + ".index");
  cluster.barrier();
  EXPECT_THROWS(AbortedError, second.save(dir + "/model", 6),
                "\"" + path(6) + ".index\" is a directory");
  if (cluster.is_chief()) {
    default_file_system()->delete_dir(path(6) + ".index");
    EXPECT(match_files(*default_file_system(), path(6) + "*").empty());
    EXPECT(temporaries(dir) == 0);
    EXPECT(latest_checkpoint(dir) == path(5));
  }
  EXPECT(second.last_checkpoints() == (std::vector<std::string>{path(4), path(5)}));
  cluster.barrier();
}

}  // namespace

// ---------------------------------------------------------------------------
// Incremental distributed saves: a table of 2 parts (one per ps task, 64 KiB
// each: saved by rows), a dense variable and the step.

struct Tables {
  Variable w;
  PartitionedVariable emb;
  Variable step;
};

Tables build_tables() {
  Variable w(Tensor::zeros(DType::kFloat, {6, 4}), {.name = "w"});
  PartitionedVariable emb = get_variable("emb", {.shape = {4096, 8},
                                                 .initializer = zeros_initializer(),
                                                 .partitioner = fixed_size_partitioner(2)});
  Variable step(Tensor(int64_t{0}), {.name = "global_step"});
  return {w, emb, step};
}

Tensor filled(int64_t rows, float value) {
  return Tensor::filled(DType::kFloat, {rows, 8}, Tensor(value), DeviceManager::instance().cpu());
}

std::vector<int64_t> delta_ids(const std::string& checkpoint, int64_t part_offset) {
  return BundleReader(checkpoint).read(delta_ids_key("emb", part_offset)).values<int64_t>();
}

// Base at step 1, deltas at 2 and 3, each task updating rows of both parts
// (rows of the other task's part are marked at their owner); a full save of
// step 3 by another saver beside it, in DIR/full. max_to_keep 2 keeps the
// base the kept deltas need.
void incremental_save(Cluster& cluster, const std::string& dir) {
  Tables t = build_tables();
  if (cluster.is_chief()) {
    std::filesystem::create_directories(dir + "/full");
    t.w.assign(make<float>({6, 4}, [](int64_t i) { return 0.5f * static_cast<float>(i); }));
    t.emb.assign(make<float>({4096, 8}, [](int64_t i) { return static_cast<float>(i % 251); }));
    t.step.assign(Tensor(int64_t{1}));
  }
  cluster.barrier();
  DistributedSaver saver(cluster, {.max_to_keep = 2, .write_meta_graph = false});
  EXPECT(saver.save(dir + "/model", {.global_step = 1, .incremental = true}) == dir + "/model-1");
  if (cluster.is_chief()) {
    t.emb.scatter_update(i64({3, 4000}), filled(2, 7.f));
    t.step.assign(Tensor(int64_t{2}));
  } else {
    t.emb.scatter_add(i64({5, 2047, 2048}), filled(3, 1.f));
  }
  cluster.barrier();
  const std::string second = saver.save(dir + "/model", {.global_step = 2, .incremental = true});
  if (cluster.is_chief()) {
    EXPECT(BundleReader(second).contains(kChainKey));
    EXPECT(delta_ids(second, 0) == (std::vector<int64_t>{3, 5, 2047}));
    EXPECT(delta_ids(second, 2048) == (std::vector<int64_t>{2048, 4000}));
  }
  cluster.barrier();
  if (cluster.is_chief()) {
    t.w.assign_add(
        Tensor::filled(DType::kFloat, {6, 4}, Tensor(1.f), DeviceManager::instance().cpu()));
    t.step.assign(Tensor(int64_t{3}));
  } else {
    t.emb.scatter_update(i64({100, 3000}), filled(2, -2.f));
  }
  cluster.barrier();
  const std::string third = saver.save(dir + "/model", {.global_step = 3, .incremental = true});
  DistributedSaver full(cluster, {.write_meta_graph = false});
  full.save(dir + "/full/model", 3);
  if (cluster.is_chief()) {
    EXPECT(checkpoint_chain(third).size() == 3);
    EXPECT(saver.last_checkpoints() == (std::vector<std::string>{second, third}));
    EXPECT(default_file_system()->file_exists(dir + "/model-1.index"));
    EXPECT(delta_ids(third, 0) == (std::vector<int64_t>{100}));
    EXPECT(delta_ids(third, 2048) == (std::vector<int64_t>{3000}));
  }
  cluster.barrier();
}

// A fresh launch: the chain restores what the full save holds, bit for bit.
void incremental_restore(Cluster& cluster, const std::string& dir) {
  Tables t = build_tables();
  DistributedSaver saver(cluster);
  saver.restore(dir + "/model-3");
  const Tensor w = t.w.value(), emb = t.emb.as_tensor();
  const int64_t step = t.step.value().scalar<int64_t>();
  EXPECT(step == 3);
  EXPECT(emb.to_vector<float>()[4000 * 8] == 7.f);
  EXPECT(emb.to_vector<float>()[3000 * 8] == -2.f);
  cluster.barrier();
  saver.restore(dir + "/full/model-3");
  EXPECT(same(t.w.value(), w));
  EXPECT(same(t.emb.as_tensor(), emb));
  EXPECT(t.step.value().scalar<int64_t>() == step);
  cluster.barrier();
}

// A chain whose delta (task 1's shard) is corrupt, then one whose base is
// gone: every task raises the same error naming the file; nothing changes.
void incremental_corrupt(Cluster& cluster, const std::string& dir) {
  Tables t = build_tables();
  if (cluster.is_chief()) {
    std::filesystem::create_directories(dir);
    t.w.assign(Tensor::zeros(DType::kFloat, {6, 4}));
    t.emb.assign(make<float>({4096, 8}, [](int64_t i) { return static_cast<float>(i % 13); }));
    t.step.assign(Tensor(int64_t{1}));
  }
  cluster.barrier();
  DistributedSaver saver(cluster, {.write_meta_graph = false});
  saver.save(dir + "/model", {.global_step = 1, .incremental = true});
  if (cluster.is_chief()) t.emb.scatter_update(i64({1, 3000}), filled(2, 5.f));
  cluster.barrier();
  const std::string delta = saver.save(dir + "/model", {.global_step = 2, .incremental = true});
  const std::string shard1 = delta + ".data-00001-of-00002";
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);
    t.emb.assign(make<float>({4096, 8}, [](int64_t) { return 9.f; }));
  }
  cluster.barrier();
  auto unchanged = [&] { EXPECT(t.emb.as_tensor().to_vector<float>()[3000 * 8] == 9.f); };
  EXPECT_THROWS(AbortedError, saver.restore(delta), shard1);
  unchanged();
  cluster.barrier();
  if (cluster.is_chief()) {
    corrupt_byte(shard1, 2);  // repaired
    default_file_system()->delete_file(dir + "/model-1.index");
  }
  cluster.barrier();
  EXPECT_THROWS(AbortedError, saver.restore(delta), dir + "/model-1");
  unchanged();
  cluster.barrier();
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ops";
  const std::string dir = argc > 2 ? argv[2] : "";
  setvbuf(stdout, nullptr, _IONBF, 0);

  // Single-process modes: no Cluster, plain Saver.
  if (mode == "check" || mode == "check_killed") {
    g_rank = 0;
    // Unpartitioned here: emb restores from the saved slices.
    Variable w(Tensor::zeros(DType::kFloat, {6, 4}), {.name = "w"});
    Variable emb = get_variable("emb", {.shape = {10, 3}, .initializer = zeros_initializer()});
    Variable step(Tensor(int64_t{0}), {.name = "global_step"});
    EXPECT(internal::remote_storage(w) == nullptr);
    Saver saver;
    const auto latest = latest_checkpoint(dir);
    EXPECT(latest.has_value());
    if (mode == "check_killed") {
      EXPECT(latest && *latest == dir + "/model-1");
      EXPECT(!default_file_system()->file_exists(dir + "/model-2.index"));
    }
    if (latest) {
      saver.restore(Session(), *latest);
      EXPECT(same(w.value(), w_value()));
      EXPECT(same(emb.value(), emb_value()));
      EXPECT(step.value().scalar<int64_t>() == (mode == "check" ? 7 : 1));
      // Rank 0 wrote the meta graph: a fresh program recreates the model
      // (emb in the 2 parts the ps tasks held) and a saver for the checkpoint.
      Graph fresh;
      std::optional<Saver> imported = import_meta_graph(*latest + ".meta", {.graph = &fresh});
      EXPECT(imported.has_value());
      if (imported) {
        imported->restore(Session(), *latest);
        EXPECT(same(fresh.find_variable("w")->value(), w_value()));
        EXPECT(fresh.find_variable("global_step")->value().scalar<int64_t>() ==
               (mode == "check" ? 7 : 1));
        EXPECT(fresh.find_variable("w")->placement().find("/job:ps/task:") == 0);
        Tensor part0 = fresh.find_variable("emb/part_0")->value();
        Tensor part1 = fresh.find_variable("emb/part_1")->value();
        EXPECT(part0.shape() == TensorShape({5, 3}) && part1.shape() == TensorShape({5, 3}));
        std::vector<float> both = part0.to_vector<float>();
        for (float x : part1.to_vector<float>()) both.push_back(x);
        EXPECT(same(Tensor::from_vector<float>(both, TensorShape({10, 3})), emb_value()));
      }
    }
    std::printf("%s: %d failure(s)\n", g_failures ? "FAILED" : "passed", g_failures);
    return g_failures ? 1 : 0;
  }

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int code = 1;
  try {
    if (mode == "ops") {
      // Jobs map to ranks ps first, whatever the spec's order.
      const ClusterSpec spec(Jobs{{"worker", {"w0:1", "w1:1"}}, {"ps", {"p0:1", "p1:1"}}});
      EXPECT_THROWS(InvalidArgumentError,
                    Cluster({.cluster_spec = ClusterSpec(Jobs{{"ps", {"p0:1"}}})}),
                    "the ClusterSpec has 1 tasks (ps with 1 task(s)) but the MPI job has 4 ranks");
      std::vector<Variable> keep;
      {
        Cluster cluster({.cluster_spec = spec});
        EXPECT(Cluster::current() == &cluster);
        EXPECT_THROWS(AlreadyExistsError, Cluster({.ps_tasks = 1}), "another Cluster is active");
        test_ops(cluster, keep);
        code = finish(&cluster);
      }
      // After shutdown, remote variables raise instead of touching MPI.
      const int before = g_failures;
      EXPECT(Cluster::current() == nullptr);
      EXPECT_THROWS(UnavailableError, keep[0].value(), "the Cluster has shut down");
      if (g_failures != before) code = 1;
    } else if (mode == "sparse") {
      Cluster cluster({.ps_tasks = 2});
      test_row_traffic(cluster);
      test_exchanges_per_owner(cluster);
      code = finish(&cluster);
    } else if (mode == "save_after_kill") {
      // The restarted job: its next distributed save into the directory of
      // the killed one removes the temporary folder the dead task's save
      // left, and, the previous list recovered, the checkpoints beyond
      // max_to_keep.
      Cluster cluster({.ps_tasks = 2});
      DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
      Model m = build_model(2);
      if (cluster.is_chief()) set_model(m, 3);
      cluster.barrier();
      DistributedSaver saver(cluster, {.max_to_keep = 1});
      if (auto state = get_checkpoint_state(dir)) {
        saver.recover_last_checkpoints(state->all_model_checkpoint_paths);
      }
      EXPECT(saver.last_checkpoints() == std::vector<std::string>{dir + "/model-1"});
      if (cluster.is_chief()) EXPECT(temporaries(dir) == 1);
      cluster.barrier();
      EXPECT(saver.save(dir + "/model", 3) == dir + "/model-3");
      if (cluster.is_chief()) {
        EXPECT(temporaries(dir) == 0);
        EXPECT(latest_checkpoint(dir) == dir + "/model-3");
        EXPECT(!default_file_system()->file_exists(dir + "/model-1.index"));
        EXPECT(indexes(dir) == 1);
      }
      cluster.barrier();
      code = finish(&cluster);
    } else if (mode == "corrupt") {
      Cluster cluster({.ps_tasks = 2});
      DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
      Model m = build_model(2);
      test_corrupt_restore(cluster, m, dir);
      code = finish(&cluster);
    } else if (mode == "die_in_save" || mode == "die_in_op" || mode == "die_in_create" ||
               mode == "die_holding_lock") {
      Cluster cluster({.ps_tasks = 2});
      if (mode == "die_in_save") die_in_save(cluster, dir);
      if (mode == "die_in_op") die_in_op(cluster);
      if (mode == "die_in_create") die_in_create(cluster);
      if (mode == "die_holding_lock") die_holding_lock(cluster);
      code = finish(&cluster);
    } else if (mode == "reshard_save" || mode == "reshard_restore") {
      Cluster cluster({.ps_tasks = std::max(1, world_size() - 1)});
      reshard(cluster, mode, dir);
      code = finish(&cluster);
    } else if (mode == "incr_save" || mode == "incr_restore" || mode == "incr_corrupt") {
      Cluster cluster({.ps_tasks = 2});
      DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
      if (mode == "incr_save") incremental_save(cluster, dir);
      if (mode == "incr_restore") incremental_restore(cluster, dir);
      if (mode == "incr_corrupt") incremental_corrupt(cluster, dir);
      code = finish(&cluster);
    } else if (mode == "retain") {
      Cluster cluster({.ps_tasks = 2});
      DeviceScope ps(replica_device_setter({.ps_tasks = 2}));
      Model m = build_model(2);
      if (cluster.is_chief()) set_model(m, 1);
      cluster.barrier();
      test_retention(cluster, dir);
      code = finish(&cluster);
    } else if (mode == "save" || mode == "restore" || mode == "kill") {
      const int ps_tasks = mode == "restore" ? 1 : 2;
      Cluster cluster({.ps_tasks = ps_tasks});
      DeviceScope ps(replica_device_setter({.ps_tasks = ps_tasks}));
      Model m = build_model(mode == "restore" ? 3 : 2);
      if (mode == "restore") {
        DistributedSaver saver(cluster);
        saver.restore(dir + "/model-7");
        check_model(m, 7);
        // Every task reads what the others restored.
        EXPECT(m.emb[2].is_initialized());
      } else {
        DyingFileSystem dying(/*limit=*/24);
        const bool dies = mode == "kill" && cluster.rank() == 1;
        DistributedSaver saver(cluster, {.file_system = dies ? &dying : nullptr});
        if (cluster.is_chief()) set_model(m, mode == "save" ? 7 : 1);
        cluster.barrier();
        if (mode == "save") {
          const std::string path = saver.save(dir + "/model", 7);
          EXPECT(path == dir + "/model-7");
          EXPECT(latest_checkpoint(dir) == path);
          // The two ps tasks hold every variable: two shards, one each.
          EXPECT(default_file_system()->file_exists(dir + "/model-7.data-00000-of-00002"));
          EXPECT(default_file_system()->file_exists(dir + "/model-7.data-00001-of-00002"));
          // Restore brings back the saved values after they changed.
          cluster.barrier();
          if (cluster.is_chief()) m.emb.assign(Tensor::zeros(DType::kFloat, {10, 3}));
          cluster.barrier();
          saver.restore(path);
          check_model(m, 7);
        } else {
          saver.save(dir + "/model", 1);  // completes
          if (cluster.is_chief()) m.step.assign(Tensor(int64_t{2}));
          dying.armed = true;
          cluster.barrier();
          saver.save(dir + "/model", 2);  // rank 1 dies in it; mpirun ends the job
          std::fprintf(stderr, "[rank %d] the second save returned\n", g_rank);
        }
      }
      cluster.barrier();
      code = finish(&cluster);
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
