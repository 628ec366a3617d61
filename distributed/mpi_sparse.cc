#include "distributed/mpi_sparse.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "runtime/distinct_rows.h"
#include "runtime/row_gather.h"
#include "runtime/scatter_by_op.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

using kernels::ScatterOp;

// Whether MPI applies `op` to v's elements atomically (else read-modify-write).
bool accumulates(const MpiVar& v, ScatterOp op) {
  return v.type != MPI_DATATYPE_NULL && op != ScatterOp::kDiv;
}

MPI_Op mpi_op(ScatterOp op) {
  switch (op) {
    case ScatterOp::kAdd:
    case ScatterOp::kSub:
      return MPI_SUM;
    case ScatterOp::kMul:
      return MPI_PROD;
    case ScatterOp::kMin:
      return MPI_MIN;
    case ScatterOp::kMax:
      return MPI_MAX;
    default:
      return MPI_REPLACE;
  }
}

// One job's distinct rows and what travels for them: for an accumulate,
// its updates combined per row; for read-modify-write, room for the rows.
struct Prepared {
  DistinctRows d;
  Tensor flat;     // the updates, [n] + row shape (or the scalar)
  Tensor compact;  // [unique] + row shape
  // Without duplicates the rows travel in the order given (compact row i
  // is the job's rows[i]), else ascending (d.unique).
  bool as_given = false;

  const std::vector<int64_t>& sent_rows(const SparseJob& job) const {
    return as_given ? job.rows : d.unique;
  }
};

Prepared prepare_scatter(ScatterOp op, const SparseJob& job, bool scalar) {
  const MpiVar& v = *job.var;
  Device& cpu = DeviceManager::instance().cpu();
  const bool combine = !accumulates(v, op) || op == ScatterOp::kSub;
  Prepared p{distinct_rows(job.rows, combine), Tensor(), Tensor()};
  const TensorShape row_shape = v.shape.tail(1);
  const int64_t n = static_cast<int64_t>(job.rows.size());
  const TensorShape compact_shape =
      TensorShape({static_cast<int64_t>(p.d.unique.size())}).concatenate(row_shape);
  p.flat = scalar ? job.values : job.values.reshaped(TensorShape({n}).concatenate(row_shape));
  if (!accumulates(v, op)) {
    p.compact = Tensor(v.dtype, compact_shape, cpu);
    return p;
  }
  if (p.d.unique.size() == job.rows.size() && op != ScatterOp::kSub) {
    // No duplicates: the updates travel as they are, no copy.
    p.as_given = true;
    p.compact = scalar ? Tensor::filled(v.dtype, compact_shape, job.values, cpu) : p.flat;
    return p;
  }
  switch (op) {
    case ScatterOp::kAdd:
    case ScatterOp::kSub:
      p.compact = Tensor::zeros(v.dtype, compact_shape, cpu);
      break;
    case ScatterOp::kMul:
      p.compact = Tensor::filled(v.dtype, compact_shape,
                                 convert_to_dtype(Tensor(1), v.dtype, v.op_name), cpu);
      break;
    default:  // update, min, max: start from each row's first update
      p.compact = scalar ? Tensor::filled(v.dtype, compact_shape, job.values, cpu)
                         : gather_rows(p.flat, p.d.first);
      break;
  }
  scatter_tensor(op, p.compact, Tensor::from_vector<int64_t>(p.d.local), p.flat,
                 {.name = v.op_name});
  return p;
}

// The jobs of one owner's window, moved as one indexed datatype from one
// contiguous buffer (the jobs' compact rows one after another).
struct Group {
  MPI_Win win = MPI_WIN_NULL;
  int owner = -1;
  std::vector<size_t> jobs;
  std::vector<char> buffer;
  MPI_Datatype rows = MPI_DATATYPE_NULL;  // the touched rows in the window
  int count = 0;                          // elements (or bytes) of `buffer`
  MPI_Datatype element = MPI_BYTE;
  MPI_Datatype marks = MPI_DATATYPE_NULL;  // the touched rows' marks
  std::vector<uint8_t> ones;               // one per touched row
};

// Groups by (owner, window), in order of first appearance; jobs without
// rows move nothing.
std::vector<Group> group_jobs(const std::vector<SparseJob>& jobs) {
  std::vector<Group> groups;
  std::map<std::pair<int, MPI_Win>, size_t> where;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].rows.empty()) continue;
    const MpiVar& v = *jobs[i].var;
    auto [it, inserted] = where.try_emplace({v.owner, v.win}, groups.size());
    if (inserted) {
      groups.emplace_back();
      groups.back().win = v.win;
      groups.back().owner = v.owner;
    }
    groups[it->second].jobs.push_back(i);
  }
  return groups;
}

// The group's rows (each job's sent rows, in job order) as one committed
// datatype of the window, and the matching element count of the buffer;
// `with_marks` (a scatter), the rows' marks too.
void describe_rows(Group& g, const std::vector<SparseJob>& jobs,
                   const std::vector<Prepared>& prepared, const MpiCallCheck& check,
                   bool with_marks) {
  const MpiVar& first = *jobs[g.jobs[0]].var;
  const bool typed = first.type != MPI_DATATYPE_NULL;
  g.element = typed ? first.type : MPI_BYTE;
  std::vector<int> lengths;
  std::vector<MPI_Aint> displacements;
  std::vector<MPI_Aint> marks;
  int64_t total = 0;
  for (size_t k = 0; k < g.jobs.size(); ++k) {
    const MpiVar& v = *jobs[g.jobs[k]].var;
    const int64_t width = typed ? v.row_width : v.row_bytes();
    for (int64_t row : prepared[g.jobs[k]].sent_rows(jobs[g.jobs[k]])) {
      lengths.push_back(static_cast<int>(width));
      displacements.push_back(v.data() + static_cast<MPI_Aint>(row * v.row_bytes()));
      if (v.marking->load()) marks.push_back(v.marks + static_cast<MPI_Aint>(row));
      total += width;
    }
  }
  if (total > INT_MAX) {
    throw UnimplementedError("sparse op on " + quoted(first.op_name) + " moves " +
                             std::to_string(total) +
                             " elements to one task in one call; at most 2^31-1 are supported");
  }
  g.count = static_cast<int>(total);
  const bool one_width =
      std::all_of(lengths.begin(), lengths.end(), [&](int n) { return n == lengths.front(); });
  if (one_width && !lengths.empty()) {
    check(MPI_Type_create_hindexed_block(static_cast<int>(lengths.size()), lengths.front(),
                                         displacements.data(), g.element, &g.rows),
          "MPI_Type_create_hindexed_block");
  } else {
    check(MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(),
                                   displacements.data(), g.element, &g.rows),
          "MPI_Type_create_hindexed");
  }
  check(MPI_Type_commit(&g.rows), "MPI_Type_commit");
  first.context->index_bytes.fetch_add(8 * displacements.size());
  if (!with_marks || marks.empty()) return;
  check(MPI_Type_create_hindexed_block(static_cast<int>(marks.size()), 1, marks.data(), MPI_UINT8_T,
                                       &g.marks),
        "MPI_Type_create_hindexed_block");
  check(MPI_Type_commit(&g.marks), "MPI_Type_commit");
  g.ones.assign(marks.size(), 1);
}

void free_types(std::vector<Group>& groups) {
  for (Group& g : groups) {
    if (g.rows != MPI_DATATYPE_NULL) MPI_Type_free(&g.rows);
    if (g.marks != MPI_DATATYPE_NULL) MPI_Type_free(&g.marks);
  }
}

// Marks the group's rows updated (for the owners' incremental saves),
// within the epoch that writes them.
void mark_rows(const Group& g, MpiContext& context, const MpiCallCheck& check) {
  if (g.marks == MPI_DATATYPE_NULL) return;
  check(MPI_Accumulate(g.ones.data(), static_cast<int>(g.ones.size()), MPI_UINT8_T, g.owner, 0, 1,
                       g.marks, MPI_REPLACE, g.win),
        "MPI_Accumulate");
  context.header_bytes.fetch_add(g.ones.size());
}

// Sizes the group's buffer for its jobs' compact rows.
void size_buffer(Group& g, const std::vector<Prepared>& prepared) {
  size_t bytes = 0;
  for (size_t j : g.jobs) bytes += prepared[j].compact.nbytes();
  g.buffer.resize(bytes);
}

// Where the group's rows are sent from or received into: its one job's
// compact tensor, or the buffer (sized) for several.
void* group_data(Group& g, std::vector<Prepared>& prepared) {
  if (g.jobs.size() == 1) return prepared[g.jobs[0]].compact.raw_data();
  size_buffer(g, prepared);
  return g.buffer.data();
}

size_t group_bytes(const Group& g, const std::vector<Prepared>& prepared) {
  size_t bytes = 0;
  for (size_t j : g.jobs) bytes += prepared[j].compact.nbytes();
  return bytes;
}

// Copies between the group's buffer and its jobs' compact tensors (nothing
// to copy for a group of one job).
void pack(Group& g, const std::vector<Prepared>& prepared) {
  if (g.jobs.size() == 1) return;
  size_buffer(g, prepared);
  size_t at = 0;
  for (size_t j : g.jobs) {
    std::memcpy(g.buffer.data() + at, prepared[j].compact.raw_data(), prepared[j].compact.nbytes());
    at += prepared[j].compact.nbytes();
  }
}

void unpack(const Group& g, std::vector<Prepared>& prepared) {
  if (g.jobs.size() == 1) return;
  size_t at = 0;
  for (size_t j : g.jobs) {
    std::memcpy(prepared[j].compact.raw_data(), g.buffer.data() + at, prepared[j].compact.nbytes());
    at += prepared[j].compact.nbytes();
  }
}

// Accumulates every group's combined rows: one epoch (shared lock) per
// group, all open at once.
void accumulate_groups(ScatterOp op, std::vector<Group>& groups, std::vector<Prepared>& prepared,
                       const std::vector<SparseJob>& jobs, MpiContext& context,
                       const MpiCallCheck& check) {
  std::vector<Epoch> epochs;
  for (Group& g : groups) {
    pack(g, prepared);
    void* data = group_data(g, prepared);
    epochs.emplace_back(context, g.win, MPI_LOCK_SHARED, g.owner, check);
    check(MPI_Accumulate(data, g.count, g.element, g.owner, 0, 1, g.rows, mpi_op(op), g.win),
          "MPI_Accumulate");
    context.data_bytes.fetch_add(group_bytes(g, prepared));
    mark_rows(g, context, check);
    for (size_t j : g.jobs) mark_updated(*jobs[j].var, /*initialize=*/false, check);
  }
  for (Epoch& e : epochs) e.close();
}

// Reads, updates and writes back every group's rows under the owners'
// exclusive locks: exact for integer division and for dtypes MPI cannot
// add.
void modify_groups(ScatterOp op, std::vector<Group>& groups, std::vector<Prepared>& prepared,
                   const std::vector<SparseJob>& jobs, MpiContext& context,
                   const MpiCallCheck& check) {
  std::vector<Epoch> epochs;
  for (Group& g : groups) {
    epochs.emplace_back(context, g.win, MPI_LOCK_EXCLUSIVE, g.owner, check);
    check(MPI_Get(group_data(g, prepared), g.count, g.element, g.owner, 0, 1, g.rows, g.win),
          "MPI_Get");
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    Group& g = groups[k];
    epochs[k].flush();
    unpack(g, prepared);
    for (size_t j : g.jobs) {
      scatter_tensor(op, prepared[j].compact, Tensor::from_vector<int64_t>(prepared[j].d.local),
                     prepared[j].flat, {.name = jobs[j].var->op_name});
    }
    pack(g, prepared);
    check(MPI_Put(group_data(g, prepared), g.count, g.element, g.owner, 0, 1, g.rows, g.win),
          "MPI_Put");
    context.data_bytes.fetch_add(2 * group_bytes(g, prepared));
    mark_rows(g, context, check);
    epochs[k].flush();
    for (size_t j : g.jobs) mark_updated(*jobs[j].var, /*initialize=*/false, check);
  }
  for (Epoch& e : epochs) e.close();
}

}  // namespace

void mpi_scatter(ScatterOp op, std::vector<SparseJob>& jobs, bool updates_scalar,
                 const MpiCallCheck& check) {
  if (jobs.empty()) return;
  std::vector<Prepared> prepared;
  prepared.reserve(jobs.size());
  for (const SparseJob& job : jobs) prepared.push_back(prepare_scatter(op, job, updates_scalar));
  std::vector<Group> groups = group_jobs(jobs);
  struct Free {
    std::vector<Group>& g;
    ~Free() { free_types(g); }
  } free_on_exit{groups};
  for (Group& g : groups) {
    describe_rows(g, jobs, prepared, check, /*with_marks=*/true);
  }
  MpiContext& context = *jobs[0].var->context;
  if (accumulates(*jobs[0].var, op)) {
    accumulate_groups(op, groups, prepared, jobs, context, check);
  } else {
    modify_groups(op, groups, prepared, jobs, context, check);
  }
}

void mpi_gather(std::vector<SparseJob>& jobs, const MpiCallCheck& check) {
  if (jobs.empty()) return;
  Device& cpu = DeviceManager::instance().cpu();
  std::vector<Prepared> prepared;
  for (const SparseJob& job : jobs) {
    const MpiVar& v = *job.var;
    Prepared p{distinct_rows(job.rows, /*positions=*/false), Tensor(), Tensor()};
    // Without duplicates the rows arrive in the order asked, in place.
    p.as_given = p.d.unique.size() == job.rows.size();
    p.compact = Tensor(
        v.dtype,
        TensorShape({static_cast<int64_t>(p.d.unique.size())}).concatenate(v.shape.tail(1)), cpu);
    prepared.push_back(std::move(p));
  }
  std::vector<Group> groups = group_jobs(jobs);
  struct Free {
    std::vector<Group>& g;
    ~Free() { free_types(g); }
  } free_on_exit{groups};
  MpiContext& context = *jobs[0].var->context;
  std::vector<Epoch> epochs;
  for (Group& g : groups) {
    describe_rows(g, jobs, prepared, check, /*with_marks=*/false);
    void* data = group_data(g, prepared);
    epochs.emplace_back(context, g.win, MPI_LOCK_SHARED, g.owner, check);
    if (g.element != MPI_BYTE) {
      // Element-wise atomic with respect to concurrent accumulates.
      check(MPI_Get_accumulate(nullptr, 0, g.element, data, g.count, g.element, g.owner, 0, 1,
                               g.rows, MPI_NO_OP, g.win),
            "MPI_Get_accumulate");
    } else {
      check(MPI_Get(data, g.count, MPI_BYTE, g.owner, 0, 1, g.rows, g.win), "MPI_Get");
    }
    context.data_bytes.fetch_add(group_bytes(g, prepared));
  }
  for (Epoch& e : epochs) e.close();
  for (Group& g : groups) unpack(g, prepared);
  for (size_t j = 0; j < jobs.size(); ++j) {
    jobs[j].values = prepared[j].as_given ? std::move(prepared[j].compact)
                                          : gather_rows(prepared[j].compact, prepared[j].d.local);
  }
}

}  // namespace varstate::internal
