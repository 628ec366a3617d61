#include "distributed/mpi_modify.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

#include "varstate/device_manager.h"
#include "varstate/error.h"

namespace varstate::internal {
namespace {

// Bytes per MPI call of a whole-value transfer (counts are ints).
constexpr int64_t kChunkBytes = int64_t{1} << 30;

// One variable's share: its values here and, for rows, the datatype of
// those rows (and of their marks) in the owner's segment.
struct Share {
  const MpiVar* var = nullptr;
  Tensor values;
  MPI_Datatype rows = MPI_DATATYPE_NULL;
  MPI_Datatype marks = MPI_DATATYPE_NULL;
  std::vector<uint8_t> ones;  // one per marked row
  int bytes = 0;              // of `values`, for rows
};

void free_types(std::vector<Share>& shares) {
  for (Share& s : shares) {
    if (s.rows != MPI_DATATYPE_NULL) MPI_Type_free(&s.rows);
    if (s.marks != MPI_DATATYPE_NULL) MPI_Type_free(&s.marks);
  }
}

// The rows of `s.var` as one committed byte datatype (and their marks').
void describe_rows(Share& s, const std::vector<int64_t>& rows, const MpiCallCheck& check) {
  const MpiVar& v = *s.var;
  const int64_t total = static_cast<int64_t>(rows.size()) * v.row_bytes();
  if (total > INT_MAX || v.row_bytes() > INT_MAX) {
    throw UnimplementedError("training op on " + quoted(v.op_name) + " moves " +
                             std::to_string(total) +
                             " bytes to one task in one call; at most 2^31-1 are supported");
  }
  s.bytes = static_cast<int>(total);
  std::vector<MPI_Aint> at(rows.size()), marks(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    at[k] = v.data() + static_cast<MPI_Aint>(rows[k] * v.row_bytes());
    marks[k] = v.marks + static_cast<MPI_Aint>(rows[k]);
  }
  check(
      MPI_Type_create_hindexed_block(static_cast<int>(rows.size()), static_cast<int>(v.row_bytes()),
                                     at.data(), MPI_BYTE, &s.rows),
      "MPI_Type_create_hindexed_block");
  check(MPI_Type_commit(&s.rows), "MPI_Type_commit");
  v.context->index_bytes.fetch_add(8 * rows.size());
  if (!v.marking->load()) return;
  check(MPI_Type_create_hindexed_block(static_cast<int>(rows.size()), 1, marks.data(), MPI_UINT8_T,
                                       &s.marks),
        "MPI_Type_create_hindexed_block");
  check(MPI_Type_commit(&s.marks), "MPI_Type_commit");
  s.ones.assign(rows.size(), 1);
}

// Gets (`put` false) or puts a share's bytes: its rows, or its whole value
// in chunks.
void transfer(Share& s, bool put, const MpiCallCheck& check) {
  const MpiVar& v = *s.var;
  char* data = static_cast<char*>(s.values.raw_data());
  v.context->data_bytes.fetch_add(s.values.nbytes());
  if (s.rows != MPI_DATATYPE_NULL) {
    if (put) {
      check(MPI_Put(data, s.bytes, MPI_BYTE, v.owner, 0, 1, s.rows, v.win), "MPI_Put");
    } else {
      check(MPI_Get(data, s.bytes, MPI_BYTE, v.owner, 0, 1, s.rows, v.win), "MPI_Get");
    }
    return;
  }
  const auto total = static_cast<int64_t>(s.values.nbytes());
  for (int64_t begin = 0; begin < total; begin += kChunkBytes) {
    const int n = static_cast<int>(std::min(kChunkBytes, total - begin));
    const MPI_Aint off = v.data() + static_cast<MPI_Aint>(begin);
    if (put) {
      check(MPI_Put(data + begin, n, MPI_BYTE, v.owner, off, n, MPI_BYTE, v.win), "MPI_Put");
    } else {
      check(MPI_Get(data + begin, n, MPI_BYTE, v.owner, off, n, MPI_BYTE, v.win), "MPI_Get");
    }
  }
}

// Marks what a share wrote (its rows, or every row) and bumps its version.
void mark_written(const Share& s, const MpiCallCheck& check) {
  const MpiVar& v = *s.var;
  if (s.rows == MPI_DATATYPE_NULL) {
    mark_all_rows(v, check);
  } else if (s.marks != MPI_DATATYPE_NULL) {
    check(MPI_Accumulate(s.ones.data(), static_cast<int>(s.ones.size()), MPI_UINT8_T, v.owner, 0, 1,
                         s.marks, MPI_REPLACE, v.win),
          "MPI_Accumulate");
    v.context->header_bytes.fetch_add(s.ones.size());
  }
  mark_updated(v, /*initialize=*/false, check);
}

// The distinct (window, owner) pairs of `shares`, in lock order.
std::vector<const MpiVar*> lock_order(const std::vector<Share>& shares) {
  std::vector<const MpiVar*> order;
  for (const Share& s : shares) {
    const MpiVar* v = s.var;
    const bool seen = std::any_of(order.begin(), order.end(), [v](const MpiVar* o) {
      return o->win == v->win && o->owner == v->owner;
    });
    if (!seen) order.push_back(v);
  }
  std::sort(order.begin(), order.end(), [](const MpiVar* a, const MpiVar* b) {
    return std::pair(a->win_order, a->owner) < std::pair(b->win_order, b->owner);
  });
  return order;
}

}  // namespace

void mpi_modify(const std::vector<MpiUpdate>& updates, const MpiCallCheck& check) {
  Device& cpu = DeviceManager::instance().cpu();
  std::vector<Share> shares;
  struct Free {
    std::vector<Share>& s;
    ~Free() { free_types(s); }
  } free_on_exit{shares};
  for (const MpiUpdate& u : updates) {
    for (const MpiVar* v : u.vars) {
      Share s;
      s.var = v;
      TensorShape shape = v->shape;
      if (u.rows->has_value()) {
        const std::vector<int64_t>& rows = **u.rows;
        shape = TensorShape({static_cast<int64_t>(rows.size())}).concatenate(v->shape.tail(1));
        shares.push_back(s);
        describe_rows(shares.back(), rows, check);
      } else {
        shares.push_back(s);
      }
      shares.back().values = Tensor(v->dtype, shape, cpu);
    }
  }
  if (shares.empty()) return;
  MpiContext& context = *shares[0].var->context;
  std::vector<Epoch> epochs;
  for (const MpiVar* v : lock_order(shares)) {
    epochs.emplace_back(context, v->win, MPI_LOCK_EXCLUSIVE, v->owner, check);
  }
  for (Share& s : shares) transfer(s, /*put=*/false, check);
  for (Epoch& e : epochs) e.flush();
  size_t next = 0;
  for (const MpiUpdate& u : updates) {
    std::vector<Tensor> values;
    for (size_t k = 0; k < u.vars.size(); ++k) values.push_back(shares[next + k].values);
    next += u.vars.size();
    (*u.fn)(values);
  }
  for (Share& s : shares) {
    transfer(s, /*put=*/true, check);
    mark_written(s, check);
  }
  for (Epoch& e : epochs) e.close();
}

}  // namespace varstate::internal
