#include "varstate/scatter.h"
#include "runtime/deferred_check.h"
#include "runtime/scatter_by_op.h"
#include "runtime/scatter_check_internal.h"
#include "runtime/scatter_validate.h"
#include "runtime/update_options_internal.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/scatter.h"
#include "kernels/scatter_ops.h"
#include "runtime/dirty_rows.h"
#include "runtime/local_storage.h"
#include "runtime/remote_storage.h"
#include "runtime/row_gather.h"
#include "runtime/variable_storage.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/math_ops.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/scatter.h"
#endif
#include "runtime/variable_access.h"

namespace varstate {
namespace {

using internal::integer_division;
using internal::scatter_state;
using internal::ScatterState;
using kernels::ScatterOp;

// ---------------------------------------------------------------------------
// Global defaults.

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s(v);
  return s == "1" || s == "true" || s == "TRUE" || s == "True" || s == "yes";
}

std::atomic<bool>& deterministic_default() {
  static std::atomic<bool> flag{env_flag("VARSTATE_DETERMINISTIC_OPS") ||
                                env_flag("TF_DETERMINISTIC_OPS")};
  return flag;
}

std::atomic<bool>& synchronous_default() {
  static std::atomic<bool> flag{env_flag("VARSTATE_SYNCHRONOUS_SCATTER_CHECKS")};
  return flag;
}

// ---------------------------------------------------------------------------
// Validation.

std::string subject(ScatterOp op, std::string_view name, std::string_view target) {
  return internal::scatter_subject(op, name, target);
}

// Arguments checked and moved to the table's device.
struct Prepared : internal::ScatterArgs {
  // Checks already done on the host; the rest run on the device.
  bool indices_checked = false;
  bool divisors_checked = false;
};

// Validates a scatter into a table of `dtype` and `shape` on `device`
// (a variable's, or a remote variable's with the CPU as device). With
// `cpu_kernel_checks` (the table is local, on the host) the index values
// are left to the CPU kernel, which checks them in its own first pass over
// the indices (run_cpu); the caller logs their rows after it (or has the
// kernel mark them: runtime/dirty_rows.h). Otherwise
// indices checked on the host mark their rows in `marks` when given.
Prepared prepare(ScatterOp op, DType dtype, const TensorShape& shape, Device& device,
                 const Tensor& indices, const Tensor& updates, const std::string& who,
                 std::atomic<uint8_t>* marks = nullptr, bool cpu_kernel_checks = false) {
  Prepared p;
  static_cast<internal::ScatterArgs&>(p) =
      internal::check_scatter_args(op, dtype, shape, indices, updates, who);
  auto move_to_table = [&] {
    p.indices = p.indices.on(device);
    p.updates = p.updates.on(device);
  };
  // A table on the host: the CPU kernel trusts its operands, so they are
  // brought there first, to be checked there wherever they came from.
  const bool table_on_cpu = device.is_cpu();
  if (table_on_cpu) move_to_table();
  if (internal::check_on_host(p.indices.on_cpu(), table_on_cpu)) {
    if (!cpu_kernel_checks) internal::check_index_values(p.indices, p.rows, who, marks);
    p.indices_checked = true;
  }
  if (integer_division(op, dtype) && internal::check_on_host(p.updates.on_cpu(), table_on_cpu)) {
    internal::check_divisors(op, p.updates, who);
    p.divisors_checked = true;
  }
  if (!table_on_cpu) move_to_table();
  return p;
}

Prepared prepare(ScatterOp op, const Tensor& table, const Tensor& indices, const Tensor& updates,
                 const std::string& who, std::atomic<uint8_t>* marks = nullptr) {
  if (!table.valid()) throw InvalidArgumentError(who + ": the target is an empty tensor handle");
  return prepare(op, table.dtype(), table.shape(), table.device(), indices, updates, who, marks,
                 /*cpu_kernel_checks=*/table.on_cpu());
}

#ifdef VARSTATE_HAVE_CUDA
bool needs_device_check(ScatterOp op, DType dtype, const Prepared& p) {
  return p.n > 0 && (!p.indices_checked || (integer_division(op, dtype) && !p.divisors_checked));
}
#endif

// ---------------------------------------------------------------------------
// Kernel dispatch.

// fn(T{}, Index{}) with T the kernel's element type: for kUpdate a plain
// word of the element's size (a copy is a copy, whatever the dtype), else the
// dtype's storage type.
template <typename Fn>
void dispatch_kernel(ScatterOp op, DType dtype, DType index_dtype, const std::string& who,
                     Fn&& fn) {
  auto with_index = [&](auto t) {
    if (index_dtype == DType::kInt32) {
      fn(t, int32_t{});
    } else {
      fn(t, int64_t{});
    }
  };
  if (op != ScatterOp::kUpdate) {
    dispatch_numeric(dtype, who, [&](auto t) {
      with_index(t);
      return 0;
    });
    return;
  }
  switch (dtype_size(dtype)) {
    case 1:
      return with_index(uint8_t{});
    case 2:
      return with_index(uint16_t{});
    case 4:
      return with_index(uint32_t{});
    case 8:
      return with_index(uint64_t{});
    case 16:
      return with_index(complex128{});
    default:
      throw_unsupported_dtype(dtype, who);
  }
}

// Whether the CPU kernel applies a scatter_sub of scaled updates in its own
// pass (kernels::cpu::scatter_sub_scaled) for a table of `dtype`.
bool fuses_scale(DType dtype) { return dtype == DType::kFloat || dtype == DType::kDouble; }

// The CPU kernel checks each index in the pass that reads it first, and
// writes nothing when one is bad: that error is raised here. With `scale`
// (op kSub, a table that fuses_scale), each update times the scale.
void run_cpu(ScatterOp op, Tensor& table, const Prepared& p, const std::string& who,
             std::atomic<uint8_t>* marks = nullptr, const Tensor* scale = nullptr) {
  int64_t bad = -1;
  dispatch_kernel(op, table.dtype(), p.indices.dtype(), who, [&](auto t, auto i) {
    using T = decltype(t);
    using Index = decltype(i);
    if (scale != nullptr) {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        bad = kernels::cpu::scatter_sub_scaled<T, Index>(
            static_cast<T*>(table.raw_data()), p.rows, p.row_width,
            static_cast<const Index*>(p.indices.raw_data()), p.n,
            static_cast<const T*>(p.updates.raw_data()), *static_cast<const T*>(scale->raw_data()),
            marks);
        return;
      }
      throw InternalError(who + ": scatter_sub_scaled has no CPU kernel for " +
                          std::string(dtype_name(table.dtype())));
    }
    bad =
        kernels::cpu::scatter<T, Index>(op, static_cast<T*>(table.raw_data()), p.rows, p.row_width,
                                        static_cast<const Index*>(p.indices.raw_data()), p.n,
                                        static_cast<const T*>(p.updates.raw_data()),
                                        p.updates_scalar, /*deterministic=*/true, marks);
  });
  if (bad >= 0) internal::throw_bad_index(p.indices, bad, p.rows, who);
}

#ifdef VARSTATE_HAVE_CUDA
using kernels::cuda::IndexCheck;

// Enqueues the checks still to do (into `check`, when given; the index
// check marking rows in `marks`, when given) and the scatter.
void enqueue_gpu(ScatterOp op, Tensor& table, const Prepared& p, bool deterministic,
                 IndexCheck* check, const std::string& who, uint8_t* marks = nullptr) {
  Device& device = table.device();
  cudaStream_t stream = device.stream();
  DeviceGuard guard(device);
  if (check != nullptr) {
    kernels::cuda::reset_index_check(check, stream);
    if (!p.indices_checked) {
      if (p.indices.dtype() == DType::kInt32) {
        kernels::cuda::validate_indices(static_cast<const int32_t*>(p.indices.raw_data()), p.n,
                                        p.rows, check, stream, marks);
      } else {
        kernels::cuda::validate_indices(static_cast<const int64_t*>(p.indices.raw_data()), p.n,
                                        p.rows, check, stream, marks);
      }
    }
    if (integer_division(op, table.dtype()) && !p.divisors_checked) {
      kernels::cuda::validate_nonzero(p.updates.raw_data(), p.updates.num_elements(),
                                      static_cast<int>(dtype_size(table.dtype())), check, stream);
    }
  }
  const kernels::cuda::ScratchAllocator scratch{
      [&device](size_t bytes) { return device.allocate(bytes); },
      [&device](void* ptr) { device.deallocate(ptr); }};
  dispatch_kernel(op, table.dtype(), p.indices.dtype(), who, [&](auto t, auto i) {
    using T = decltype(t);
    using Index = decltype(i);
    kernels::cuda::scatter<T, Index>(op, static_cast<T*>(table.raw_data()), p.rows, p.row_width,
                                     static_cast<const Index*>(p.indices.raw_data()), p.n,
                                     static_cast<const T*>(p.updates.raw_data()), p.updates_scalar,
                                     deterministic, check, scratch, stream);
  });
}
#endif

// ---------------------------------------------------------------------------
// Entry points.

bool resolve(const std::optional<bool>& value, const std::atomic<bool>& fallback) {
  return value.has_value() ? *value : fallback.load();
}

// The dirty-row bookkeeping of one scatter into a local table, whatever
// happens: the marks its writers set before they write (held under a
// DirtyRows::Writing guard until it is gone), then, after the write,
// finish() logs the rows the marks did not cover and bumps the version. If
// the scatter throws after begin_write() (a GPU scatter whose write may be
// enqueued when a later step fails), the destructor marks every row and
// bumps the version instead: more rows than were written is always safe,
// an unmarked write never is. (The CPU kernel writes nothing when it
// throws: nothing to mark then.)
class ScatterBookkeeping {
 public:
  // A table on the host logs its rows after the kernel's (synchronous)
  // write, or, while its log overflows, has the kernel mark them before it
  // writes them. Elsewhere they are marked before the write, as the
  // indices are checked (on the host, or on the device by its check).
  ScatterBookkeeping(internal::LocalStorage& storage, const Tensor& table)
      : storage_(storage), dirty_(storage.dirty_rows()), writing_(std::in_place, dirty_) {
    const TensorShape& shape = table.shape();
    const int64_t rows = shape.rank() > 0 ? shape.dim(0) : 0;
    on_host_ = table.valid() && table.on_cpu();
    const int64_t row_bytes = shape.rank() > 0 ? shape.tail(1).num_elements() *
                                                     static_cast<int64_t>(dtype_size(table.dtype()))
                                               : 0;
    marks_ = on_host_ ? dirty_.marks_if_overflowed(rows, row_bytes) : dirty_.marks(rows);
    if (on_host_ && !marks_) writing_.reset();
  }
  ~ScatterBookkeeping() {
    if (!started_ || finished_) return;
    try {
      storage_.note_write(/*all_rows=*/true);
    } catch (...) {
      // Unwinding already; marking is all that is left to lose.
    }
  }
  ScatterBookkeeping(const ScatterBookkeeping&) = delete;
  ScatterBookkeeping& operator=(const ScatterBookkeeping&) = delete;

  // The host byte marks the index check or the CPU kernel sets, or null.
  std::atomic<uint8_t>* host_marks() const { return marks_.get(); }
  // The device marks a GPU index check sets for a table of `rows` rows on
  // `device`, or null.
  uint8_t* device_marks(Device& device, int64_t rows) {
    device_marks_ = dirty_.device_marks(device, rows);
    return device_marks_;
  }
  // The write may start from here on.
  void begin_write() { started_ = true; }
  // The write is complete (host) or enqueued (device), with `p`'s rows.
  void finish(const Prepared& p) {
    if (on_host_ && !marks_) dirty_.record(p.rows, p.indices);
    finished_ = true;
    // Rows checked on the host are marked there, on the device by its check.
    storage_.note_write(/*all_rows=*/!p.indices_checked && device_marks_ == nullptr);
  }

 private:
  internal::LocalStorage& storage_;
  internal::DirtyRows& dirty_;
  std::optional<internal::DirtyRows::Writing> writing_;
  internal::DirtyRows::Marks marks_;
  uint8_t* device_marks_ = nullptr;
  bool on_host_ = false;
  bool started_ = false;
  bool finished_ = false;
};

}  // namespace

namespace internal {

void scatter_remote(ScatterOp op, Variable& ref, RemoteStorage& remote, const Tensor& indices,
                    const Tensor& updates, const std::string& who) {
  if (!remote.is_initialized()) throw_uninitialized(ref.op_name());
  Device& cpu = DeviceManager::instance().cpu();
  Prepared p =
      prepare(op, ref.dtype(), ref.shape(), cpu, indices.valid() ? indices.to_host() : indices,
              updates.valid() ? updates.to_host() : updates, who);
  if (p.n == 0 || p.row_width == 0) return;
  remote.scatter_at_owner(op, host_indices(p.indices), p.updates, p.updates_scalar);
}

Tensor scatter_local(ScatterOp op, Variable& ref, LocalStorage& storage, const Tensor& indices,
                     const Tensor& updates, const UpdateOptions& options, const std::string& who,
                     const Tensor* scale) {
  // As ref(): any finished deferred error of an earlier scatter, and
  // FailedPreconditionError when uninitialized (LocalStorage is final: a
  // direct call).
  raise_finished_errors(ref);
  Tensor table = storage.read_live(ref);
  ScatterBookkeeping book(storage, table);
  Prepared p = prepare(op, table, indices, updates, who, book.host_marks());
  if (scale != nullptr) {
    if (op != ScatterOp::kSub || scale->dtype() != table.dtype() || scale->num_elements() != 1 ||
        !scale->on_cpu()) {
      throw InternalError(who + ": a scatter's scale must be a host scalar of " +
                          std::string(dtype_name(table.dtype())) + " for scatter_sub");
    }
    if (p.updates_scalar || !table.on_cpu() || !fuses_scale(table.dtype())) {
      // The multiply as its own op (on the GPU, the scale its argument).
      p.updates = p.updates * *scale;
      scale = nullptr;
    }
  }
  const bool deterministic = resolve(options.deterministic, deterministic_default());
  const bool synchronous = resolve(options.synchronous, synchronous_default());
  std::shared_ptr<ScatterState> state = scatter_state(ref);

  std::unique_lock<std::mutex> locked;
  if (use_locking(options, op, UpdateCaller::kFunction)) {
    locked = std::unique_lock(update_mutex(ref));
  }
  std::unique_lock serial(state->mutex());
  if (p.n == 0 || p.row_width == 0) return table;
  if (table.on_cpu()) {
    // The kernel's write is complete when it returns; a bad index threw
    // before it wrote anything.
    run_cpu(op, table, p, who, book.host_marks(), scale);
    book.finish(p);
    return table;
  }
#ifdef VARSTATE_HAVE_CUDA
  book.begin_write();
  if (!needs_device_check(op, table.dtype(), p)) {
    enqueue_gpu(op, table, p, deterministic, nullptr, who);
    book.finish(p);
    return table;
  }
  Device& device = table.device();
  DeferredIndexCheck check(state, std::move(serial), device);
  uint8_t* device_marks = p.indices_checked ? nullptr : book.device_marks(device, p.rows);
  enqueue_gpu(op, table, p, deterministic, check.record(), who, device_marks);
  book.finish(p);
  // Releases the scatter lock; the update lock goes before any wait.
  check.commit(who, p.indices.shape(), p.updates.shape(), p.rows, /*synchronous=*/false);
  if (locked.owns_lock()) locked.unlock();
  if (synchronous) state->raise_pending_errors(/*wait=*/true);
#else
  (void)deterministic, (void)synchronous;
#endif
  return table;
}

void scatter_into(ScatterOp op, Variable& ref, const Tensor& indices, const Tensor& updates,
                  const UpdateOptions& options, const std::string& who) {
  storage(ref).scatter(op, ref, indices, updates, options, who, /*read_back=*/false);
}

void scatter_cpu_parts(ScatterOp op, std::vector<Variable>& parts,
                       const std::vector<int64_t>& offsets, std::span<const int64_t> indices,
                       const TensorShape& indices_shape, const Tensor& updates, bool updates_scalar,
                       const UpdateOptions& options, const std::string& who) {
  if (parts.empty()) return;
  // Locks in part order (so two partitioned scatters cannot deadlock), as a
  // scatter on each part would take them.
  const bool locking = use_locking(options, op, UpdateCaller::kPartitioned);
  std::vector<std::shared_ptr<ScatterState>> states;
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<Tensor> tables;
  std::vector<void*> bases;
  std::vector<int64_t> begin;
  std::vector<DirtyRows*> dirty;
  for (size_t k = 0; k < parts.size(); ++k) {
    tables.push_back(parts[k].ref());
    if (locking) locks.emplace_back(internal::update_mutex(parts[k]));
    states.push_back(scatter_state(parts[k]));
    locks.emplace_back(states.back()->mutex());
    bases.push_back(tables.back().raw_data());
    begin.push_back(offsets[k]);
    dirty.push_back(&dirty_rows(parts[k]));
  }
  // The end of the last part (offsets may or may not list it).
  begin.push_back(begin.back() + tables.back().shape().dim(0));
  const int64_t rows = begin.back();
  const int64_t row_width = tables[0].shape().tail(1).num_elements();
  const int64_t n = static_cast<int64_t>(indices.size());
  if (n == 0 || row_width == 0) return;
  // The rows are logged after the write in the parts' group (a DirtyRows of
  // the whole variable: runtime/dirty_rows.h). While the group's log has
  // overflowed, the kernel marks them in the group's bytes instead, each
  // part's rows in its range of them, under the group's Writing guard.
  const std::shared_ptr<DirtyRows> group = DirtyRows::shared_group(dirty, begin);
  std::optional<DirtyRows::Writing> writing;
  DirtyRows::Marks group_marks;
  std::vector<std::atomic<uint8_t>*> marks;
  if (group) {
    writing.emplace(*group);
    group_marks = group->marks_if_overflowed(rows, row_width * dtype_size(tables[0].dtype()));
    if (group_marks) {
      for (size_t k = 0; k < parts.size(); ++k) marks.push_back(group_marks.get() + begin[k]);
    } else {
      writing.reset();
    }
  }
  int64_t bad = -1;
  dispatch_kernel(op, tables[0].dtype(), DType::kInt64, who, [&](auto t, auto) {
    using T = decltype(t);
    bad = kernels::cpu::scatter_parts<T, int64_t>(
        op, reinterpret_cast<T* const*>(bases.data()), begin.data(), static_cast<int>(parts.size()),
        row_width, indices.data(), n, static_cast<const T*>(updates.raw_data()), updates_scalar,
        group_marks ? marks.data() : nullptr);
  });
  if (bad >= 0) {
    throw InvalidArgumentError(
        internal::bad_index_message(who, bad, indices_shape, indices[bad], rows));
  }
  // Tracking is looked for after the write: a part whose first take comes
  // after this look reports every row, this write's included. A group is
  // made only once a part tracks, and a part never stops; the group found
  // above still holds (a relink is a writer's, and this one holds every
  // part's scatter lock).
  if (!group_marks) {
    if (group) {
      group->record(rows, indices);
    } else if (std::any_of(dirty.begin(), dirty.end(),
                           [](DirtyRows* d) { return d->tracking(); })) {
      DirtyRows::link_group(dirty, begin)->record(rows, indices);
    }
  }
  for (Variable& part : parts) mark_rows_updated(part);
}

void scatter_tensor(ScatterOp op, Tensor& target, const Tensor& indices, const Tensor& updates,
                    const UpdateOptions& options, bool indices_in_range) {
  const std::string who = subject(op, options.name, {});
  Prepared p = prepare(op, target, indices, updates, who);
  if (indices_in_range) p.indices_checked = true;
  if (p.n == 0 || p.row_width == 0) return;
  if (target.on_cpu()) {
    run_cpu(op, target, p, who);
    return;
  }
#ifdef VARSTATE_HAVE_CUDA
  const bool deterministic = resolve(options.deterministic, deterministic_default());
  if (!needs_device_check(op, target.dtype(), p)) {
    enqueue_gpu(op, target, p, deterministic, nullptr, who);
    return;
  }
  const std::string error = internal::check_now(
      target.device(),
      [&](IndexCheck* check) { enqueue_gpu(op, target, p, deterministic, check, who); }, who,
      p.indices.shape(), p.updates.shape(), p.rows);
  if (!error.empty()) throw InvalidArgumentError(error);
#endif
}

}  // namespace internal

namespace {

Tensor scatter_variable(ScatterOp op, Variable& ref, const Tensor& indices, const Tensor& updates,
                        const UpdateOptions& options) {
  const std::string who = subject(op, options.name, ref.op_name());
  return internal::storage(ref).scatter(op, ref, indices, updates, options, who,
                                        /*read_back=*/true);
}

Tensor scatter_slices(ScatterOp op, Variable& ref, const IndexedSlices& delta,
                      const UpdateOptions& options) {
  internal::check_dense_shape(delta, ref.shape(), subject(op, options.name, ref.op_name()));
  return scatter_variable(op, ref, delta.indices(), delta.values(), options);
}

}  // namespace

// The public entries of every op of the scatter family
// (VARSTATE_SCATTER_OPS): on a Variable, on IndexedSlices, on a plain tensor.
#define VARSTATE_DEFINE_SCATTER(kind, fn, node, arithmetic, ordered)                          \
  Tensor fn(Variable& ref, const Tensor& indices, const Tensor& updates,                      \
            const UpdateOptions& options) {                                                   \
    return scatter_variable(ScatterOp::kind, ref, indices, updates, options);                 \
  }                                                                                           \
  Tensor fn(Variable& ref, const IndexedSlices& sparse_delta, const UpdateOptions& options) { \
    return scatter_slices(ScatterOp::kind, ref, sparse_delta, options);                       \
  }                                                                                           \
  void fn(Tensor& target, const Tensor& indices, const Tensor& updates,                       \
          const UpdateOptions& options) {                                                     \
    internal::scatter_tensor(ScatterOp::kind, target, indices, updates, options);             \
  }
VARSTATE_SCATTER_OPS(VARSTATE_DEFINE_SCATTER)
#undef VARSTATE_DEFINE_SCATTER

void set_deterministic_ops(bool enabled) { deterministic_default().store(enabled); }
bool deterministic_ops() { return deterministic_default().load(); }

void set_synchronous_scatter_checks(bool enabled) { synchronous_default().store(enabled); }
bool synchronous_scatter_checks() { return synchronous_default().load(); }

}  // namespace varstate
