// mpi_test modes "ops" (every remote op against a local reference, errors,
// concurrent updates, count_up_to, partitioned variables, caching) and
// "sparse" (bytes on the wire of remote gathers and scatters, exchanges per
// partitioned op); np 4: 2 ps + 2 workers.
#include <algorithm>
#include <numeric>
#include <thread>

#include "distributed/cluster_collectives.h"
#include "mpi_test_util.h"
#include "runtime/remote_storage.h"

namespace varstate::mpi_test {
namespace {

// ---------------------------------------------------------------------------
// ops: 2 ps + 2 workers

// Jobs, tasks and ranks; a job's barrier and the cluster's.
void check_topology(Cluster& cluster) {
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
}

// Update rows for the [6,4] float variable `a`.
Tensor a_update_rows() {
  return make<float>({3, 4}, [](int64_t i) { return static_cast<float>(i) - 5.f; });
}

// Every op, applied by the chief to the remote variables and by every
// task to its local references; then every task compares.
void check_ops_match_references(Cluster& cluster, Variable& a, Variable& b, Variable& a_ref,
                                Variable& b_ref) {
  const bool chief = cluster.is_chief();
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
  const Tensor rows4 = a_update_rows();
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
}

// Errors (the chief's calls): raised before anything is sent, the variable
// unchanged; count_up_to hands out the value before, then OutOfRangeError.
void check_errors_change_nothing(Cluster& cluster, Variable& a, Variable& b, Variable& never,
                                 Variable& counter) {
  if (!cluster.is_chief()) return;
  const Tensor rows4 = a_update_rows();
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

// What remote variables do not do, and placements on tasks the cluster
// lacks (every task; no window is created, so the collective order stays
// intact).
void check_unsupported_and_unknown_tasks(Cluster& cluster, Variable& a) {
  // A clear UnimplementedError naming the variable.
  {
    EXPECT_THROWS(UnimplementedError, Variable(Tensor("s"), {.name = "text"}),
                  "variable \"text\" is placed on /job:ps/task:");
    EXPECT_THROWS(UnimplementedError,
                  a.assign(Tensor::zeros(DType::kFloat, {7, 4}), {.validate_shape = false}),
                  "variable \"a\" on /job:ps/task:0 cannot change shape (validate_shape=False)");
  }
  // A placement naming a task the cluster lacks.
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
}

// Caching device: one copy per change of the owner's value.
void check_caching_device(Cluster& cluster, Variable& cached) {
  const bool chief = cluster.is_chief();
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
}

// Concurrency: every task scatter_adds and assign_adds at once.
void check_concurrent_updates(Cluster& cluster, Variable& total, Variable& sum) {
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
}

// count_up_to under contention: every value handed out exactly once.
void check_count_up_to_contention(Cluster& cluster) {
  Variable ticket(Tensor(int64_t{0}), {.name = "ticket"});
  if (cluster.is_chief()) Session().run(ticket.initializer());
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
}

// A partitioned variable over both ps tasks: each scatter is one
// exchange per part (each part's version moves by one).
void check_partitioned_variable(Cluster& cluster) {
  const bool chief = cluster.is_chief();
  const int r = cluster.rank();
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

// The ops mode: local references and remote variables (every task creates
// them, in the same order), then the checks above, each on every task.
void test_ops(Cluster& cluster, std::vector<Variable>& keep) {
  check_topology(cluster);
  const bool chief = cluster.is_chief();
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

  check_ops_match_references(cluster, a, b, a_ref, b_ref);
  check_errors_change_nothing(cluster, a, b, never, counter);
  check_unsupported_and_unknown_tasks(cluster, a);
  check_caching_device(cluster, cached);
  check_concurrent_updates(cluster, total, sum);
  // These two make their own variables, under the ps scope too.
  check_count_up_to_contention(cluster);
  check_partitioned_variable(cluster);
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
    for (const auto& [name, part_op] : ops) {
      // A copy: clang before 16 lets no lambda capture a structured binding.
      const PartOp op = part_op;
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

}  // namespace

int run_ops() {
  int code = 1;
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
  return code;
}

int run_sparse() {
  Cluster cluster({.ps_tasks = 2});
  test_row_traffic(cluster);
  test_exchanges_per_owner(cluster);
  return finish(&cluster);
}

}  // namespace varstate::mpi_test
