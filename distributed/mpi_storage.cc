#include "distributed/mpi_storage.h"

#include "distributed/mpi_modify.h"
#include "distributed/mpi_sparse.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <thread>

#include "runtime/row_gather.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/scatter.h"

namespace varstate::internal {
namespace {

using kernels::ScatterOp;

// Elements per MPI call of a whole-value transfer (counts are ints).
constexpr int64_t kChunk = int64_t{1} << 28;

class MpiStorage final : public internal::RemoteStorage {
 public:
  // Unplaced until bind() gives it its window and offset.
  MpiStorage(std::shared_ptr<MpiContext> shared, std::string op_name, int owner, DType dtype,
             TensorShape shape)
      : shared_(std::move(shared)),
        op_name_(std::move(op_name)),
        owner_(owner),
        task_(shared_->task_names[static_cast<size_t>(owner)]),
        dtype_(dtype),
        shape_(std::move(shape)),
        type_(mpi_type(dtype)),
        elements_(shape_.num_elements()),
        esize_(static_cast<int64_t>(dtype_size(dtype))),
        row_width_(shape_.rank() >= 1 ? shape_.tail(1).num_elements() : 1) {
    check_ = [this](int rc, const char* what) { check(rc, what); };
    var_ = {shared_.get(), op_name_, task_, owner_, dtype_,    shape_,
            MPI_WIN_NULL,  0,        type_, esize_, row_width_};
    var_.rows = shape_.rank() >= 1 ? shape_.dim(0) : 1;
  }

  void bind(MPI_Win win, int64_t win_order, MPI_Aint base) {
    var_.win = win;
    var_.win_order = win_order;
    var_.base = base;
    var_.marks = base + value_footprint();
  }
  // Bytes of its header, value and row marks in the owner's segment.
  MPI_Aint footprint() const { return value_footprint() + static_cast<MPI_Aint>(var_.rows); }
  const MpiVar& var() const { return var_; }

  const std::string& task() const override { return task_; }
  TensorShape shape() const override { return shape_; }
  int owner() const { return owner_; }

  bool is_initialized() override {
    if (initialized_.load()) return true;
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(*shared_, var_.win, MPI_LOCK_SHARED, owner_, check_);
    const bool init = fetch(e, var_.base + kFlagOffset) != 0;
    e.close();
    if (init) initialized_.store(true);
    return init;
  }

  uint64_t version() override {
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(*shared_, var_.win, MPI_LOCK_SHARED, owner_, check_);
    const int64_t v = fetch(e, var_.base + kVersionOffset);
    e.close();
    return static_cast<uint64_t>(v);
  }

  uint64_t cache_copies() const override { return cache_copies_.load(); }

  Tensor read(bool cached) override {
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(*shared_, var_.win, MPI_LOCK_SHARED, owner_, check_);
    if (!initialized_.load()) {
      if (fetch(e, var_.base + kFlagOffset) == 0) {
        e.close();
        throw FailedPreconditionError("Attempting to use uninitialized value " + op_name_);
      }
      initialized_.store(true);
    }
    int64_t version = 0;
    if (cached) {
      version = fetch(e, var_.base + kVersionOffset);
      if (cached_.valid() && cached_version_ == version) {
        e.close();
        return cached_;
      }
    }
    Tensor t(dtype_, shape_, DeviceManager::instance().cpu());
    get_all(t.raw_data());
    e.close();
    if (cached) {
      cached_ = t;
      cached_version_ = version;
      cache_copies_.fetch_add(1);
    }
    return t;
  }

  void write(const Tensor& value) override {
    std::lock_guard lock(shared_->mu);
    alive();
    // Under the exclusive lock no other task's op overlaps the put, so it is
    // atomic with respect to them, and a plain copy (an element-wise
    // REPLACE accumulate is several times slower).
    Epoch e(*shared_, var_.win, MPI_LOCK_EXCLUSIVE, owner_, check_);
    put_all(value.raw_data());
    e.flush();
    mark(e, /*initialize=*/true);
    e.close();
    initialized_.store(true);
  }

  void write_rows(const std::vector<RowBytes>& runs) override {
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(*shared_, var_.win, MPI_LOCK_EXCLUSIVE, owner_, check_);
    // Into this task's own segment (a ps task restoring its parts): copied
    // in place within the exclusive epoch, not put through the transport,
    // which over shared memory copies each byte twice.
    char* local = owner_ == shared_->my_rank ? local_segment() : nullptr;
    for (const RowBytes& run : runs) {
      const int64_t offset = run.row * row_width_ * esize_;
      if (local != nullptr) {
        std::memcpy(local + var_.data() + offset, run.data, run.bytes);
        shared_->data_bytes.fetch_add(static_cast<uint64_t>(run.bytes));
      } else {
        put_bytes(offset, run.data, static_cast<int64_t>(run.bytes));
      }
    }
    // The stores made visible to the window's later accesses.
    if (local != nullptr) check(MPI_Win_sync(var_.win), "MPI_Win_sync");
    e.flush();
    mark(e, /*initialize=*/true);
    e.close();
    initialized_.store(true);
  }

  Tensor add(const Tensor& delta, bool negate) override {
    if (type_ == MPI_DATATYPE_NULL) {
      return modify([&](Tensor& whole) {
        if (negate) {
          varstate::assign_sub(whole, delta, {.name = op_name_});
        } else {
          varstate::assign_add(whole, delta, {.name = op_name_});
        }
      });
    }
    Tensor d = delta;
    if (negate) {
      d = Tensor::zeros(dtype_, shape_, DeviceManager::instance().cpu());
      varstate::assign_sub(d, delta, {.name = op_name_});
    }
    Tensor old(dtype_, shape_, DeviceManager::instance().cpu());
    {
      std::lock_guard lock(shared_->mu);
      alive();
      Epoch e(*shared_, var_.win, MPI_LOCK_SHARED, owner_, check_);
      // The delta goes, the old value comes back.
      shared_->data_bytes.fetch_add(static_cast<uint64_t>(2 * elements_ * esize_));
      for (int64_t begin = 0; begin < elements_; begin += kChunk) {
        const int n = static_cast<int>(std::min(kChunk, elements_ - begin));
        const MPI_Aint off = var_.data() + static_cast<MPI_Aint>(begin * esize_);
        check(MPI_Get_accumulate(byte_at(d.raw_data(), begin), n, type_,
                                 byte_at(old.raw_data(), begin), n, type_, owner_, off, n, type_,
                                 MPI_SUM, var_.win),
              "MPI_Get_accumulate");
      }
      mark(e, /*initialize=*/false);
      e.close();
    }
    // The value this update produced: the fetched old value plus delta.
    varstate::assign_add(old, d, {.name = op_name_});
    return old;
  }

  Tensor modify(const std::function<void(Tensor&)>& fn) override {
    Tensor t(dtype_, shape_, DeviceManager::instance().cpu());
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(*shared_, var_.win, MPI_LOCK_EXCLUSIVE, owner_, check_);
    get_all(t.raw_data());
    e.flush();
    fn(t);
    put_all(t.raw_data());
    e.flush();
    mark(e, /*initialize=*/false);
    e.close();
    return t;
  }

  void scatter_at_owner(ScatterOp op, const std::vector<int64_t>& rows, const Tensor& updates,
                        bool updates_scalar) override {
    std::vector<RemotePart> parts{{this, rows, updates}};
    scatter_at_owners(op, parts, updates_scalar);
  }

  Tensor gather_from_owner(const std::vector<int64_t>& rows) override {
    std::vector<RemotePart> parts{{this, rows, Tensor()}};
    gather_from_owners(parts);
    return parts[0].values;
  }

  void scatter_at_owners(ScatterOp op, std::vector<RemotePart>& parts,
                         bool updates_scalar) override {
    std::vector<SparseJob> jobs = sparse_jobs(parts);
    std::lock_guard lock(shared_->mu);
    alive();
    mpi_scatter(op, jobs, updates_scalar, check_);
  }

  void gather_from_owners(std::vector<RemotePart>& parts) override {
    std::vector<SparseJob> jobs = sparse_jobs(parts);
    {
      std::lock_guard lock(shared_->mu);
      alive();
      mpi_gather(jobs, check_);
    }
    for (size_t k = 0; k < parts.size(); ++k) parts[k].values = std::move(jobs[k].values);
  }

  void modify_rows(std::vector<RemoteUpdate>& updates) override {
    std::vector<MpiUpdate> mpi;
    for (const RemoteUpdate& u : updates) {
      MpiUpdate m{{}, &u.rows, &u.fn};
      for (VariableStorage* storage : u.storages) {
        const auto* other = dynamic_cast<const MpiStorage*>(storage);
        if (other == nullptr || other->shared_ != shared_) {
          throw InternalError("training op on " + quoted(op_name_) +
                              ": a variable of it is not held by this Cluster");
        }
        m.vars.push_back(&other->var_);
      }
      mpi.push_back(std::move(m));
    }
    std::lock_guard lock(shared_->mu);
    alive();
    mpi_modify(mpi, check_);
  }

  void start_marking() override { var_.marking->store(true); }

  std::vector<int64_t> take_marked_rows() override {
    std::vector<uint8_t> marks(static_cast<size_t>(var_.rows));
    const std::vector<uint8_t> zeros(marks.size(), 0);
    {
      std::lock_guard lock(shared_->mu);
      alive();
      // Exclusive: no update lands between the read and the clear.
      Epoch e(*shared_, var_.win, MPI_LOCK_EXCLUSIVE, owner_, check_);
      for (int64_t begin = 0; begin < var_.rows; begin += kChunk) {
        const int n = static_cast<int>(std::min(kChunk, var_.rows - begin));
        check(MPI_Get(marks.data() + begin, n, MPI_UINT8_T, owner_, var_.marks + begin, n,
                      MPI_UINT8_T, var_.win),
              "MPI_Get");
      }
      e.flush();
      for (int64_t begin = 0; begin < var_.rows; begin += kChunk) {
        const int n = static_cast<int>(std::min(kChunk, var_.rows - begin));
        check(MPI_Put(zeros.data() + begin, n, MPI_UINT8_T, owner_, var_.marks + begin, n,
                      MPI_UINT8_T, var_.win),
              "MPI_Put");
      }
      e.close();
    }
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < var_.rows; ++r) {
      if (marks[static_cast<size_t>(r)] != 0) rows.push_back(r);
    }
    return rows;
  }

  int64_t count_up_to(int64_t limit, const std::string& op_name) override {
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(*shared_, var_.win, MPI_LOCK_SHARED, owner_, check_);
    const MPI_Datatype t = dtype_ == DType::kInt32 ? MPI_INT32_T : MPI_INT64_T;
    for (;;) {
      int64_t current = 0;
      int32_t current32 = 0;
      void* cur = dtype_ == DType::kInt32 ? static_cast<void*>(&current32) : &current;
      check(MPI_Fetch_and_op(nullptr, cur, t, owner_, var_.data(), MPI_NO_OP, var_.win),
            "MPI_Fetch_and_op");
      e.flush();
      if (dtype_ == DType::kInt32) current = current32;
      if (current >= limit) {
        e.close();
        throw OutOfRangeError("CountUpTo on \"" + op_name + "\": Reached limit of " +
                              std::to_string(limit));
      }
      int64_t next = current + 1, seen = 0;
      int32_t next32 = static_cast<int32_t>(next), seen32 = 0;
      if (dtype_ == DType::kInt32) {
        check(MPI_Compare_and_swap(&next32, &current32, &seen32, t, owner_, var_.data(), var_.win),
              "MPI_Compare_and_swap");
      } else {
        check(MPI_Compare_and_swap(&next, &current, &seen, t, owner_, var_.data(), var_.win),
              "MPI_Compare_and_swap");
      }
      e.flush();
      if (dtype_ == DType::kInt32) seen = seen32;
      if (seen == current) {
        mark(e, /*initialize=*/false);
        e.close();
        return current;
      }
    }
  }

 private:
  [[noreturn]] void fail(int rc, const char* what) const {
    throw UnavailableError(std::string(what) + " on " + quoted(op_name_) + " held by " + task_ +
                           " (rank " + std::to_string(owner_) +
                           ") failed: " + mpi_error_string(rc));
  }
  void check(int rc, const char* what) const {
    if (rc != MPI_SUCCESS) fail(rc, what);
  }
  void alive() const {
    if (!shared_->alive) {
      throw UnavailableError("variable " + quoted(op_name_) + " on " + task_ +
                             ": the Cluster has shut down");
    }
  }
  // The parts as jobs of the sparse ops (every storage is an MpiStorage of
  // this Cluster: the parts of one partitioned variable).
  static std::vector<SparseJob> sparse_jobs(std::vector<RemotePart>& parts) {
    std::vector<SparseJob> jobs;
    jobs.reserve(parts.size());
    for (RemotePart& part : parts) {
      jobs.push_back({&static_cast<MpiStorage*>(part.storage)->var_, std::move(part.rows),
                      std::move(part.values)});
    }
    return jobs;
  }
  static void* byte_at(void* base, int64_t element, int64_t esize) {
    return static_cast<char*>(base) + element * esize;
  }
  void* byte_at(void* base, int64_t element) const { return byte_at(base, element, esize_); }
  void* byte_at(const void* base, int64_t element) const {
    return byte_at(const_cast<void*>(base), element, esize_);
  }

  // An atomic read of one header field (within an epoch).
  int64_t fetch(Epoch& e, MPI_Aint offset) {
    int64_t value = 0;
    shared_->header_bytes.fetch_add(8);
    check(MPI_Fetch_and_op(nullptr, &value, MPI_INT64_T, owner_, offset, MPI_NO_OP, var_.win),
          "MPI_Fetch_and_op");
    e.flush();
    return value;
  }
  // A whole-value update: every row is marked.
  void mark(Epoch&, bool initialize) {
    mark_updated(var_, initialize, check_);
    mark_all_rows(var_, check_);
  }
  MPI_Aint value_footprint() const {
    const auto bytes = kDataOffset + static_cast<MPI_Aint>(elements_ * esize_);
    return (bytes + kVariableAlign - 1) / kVariableAlign * kVariableAlign;
  }

  void get_all(void* out) {
    shared_->data_bytes.fetch_add(static_cast<uint64_t>(elements_ * esize_));
    for (int64_t begin = 0; begin < elements_; begin += kChunk) {
      const int64_t n = std::min(kChunk, elements_ - begin);
      const MPI_Aint off = var_.data() + static_cast<MPI_Aint>(begin * esize_);
      if (type_ != MPI_DATATYPE_NULL) {
        // Element-wise atomic with respect to concurrent accumulates.
        check(MPI_Get_accumulate(nullptr, 0, type_, byte_at(out, begin), static_cast<int>(n), type_,
                                 owner_, off, static_cast<int>(n), type_, MPI_NO_OP, var_.win),
              "MPI_Get_accumulate");
      } else {
        const int bytes = static_cast<int>(n * esize_);
        check(MPI_Get(byte_at(out, begin), bytes, MPI_BYTE, owner_, off, bytes, MPI_BYTE, var_.win),
              "MPI_Get");
      }
    }
  }
  void put_all(const void* in) { put_bytes(0, in, elements_ * esize_); }
  // Bytes [offset, offset + n) of the value from `in`.
  // The start of this task's segment of the window (it owns it), or null
  // when MPI does not say (or its memory model is not unified, where local
  // stores need not be seen by RMA).
  char* local_segment() const {
    void* base = nullptr;
    int* model = nullptr;
    int found = 0;
    MPI_Win_get_attr(var_.win, MPI_WIN_MODEL, &model, &found);
    if (!found || model == nullptr || *model != MPI_WIN_UNIFIED) return nullptr;
    MPI_Win_get_attr(var_.win, MPI_WIN_BASE, &base, &found);
    return found ? static_cast<char*>(base) : nullptr;
  }
  void put_bytes(int64_t offset, const void* in, int64_t n) {
    shared_->data_bytes.fetch_add(static_cast<uint64_t>(n));
    // Byte counts are ints: at most 1 GiB per call.
    constexpr int64_t kMaxPut = int64_t{1} << 30;
    for (int64_t begin = 0; begin < n; begin += kMaxPut) {
      const int bytes = static_cast<int>(std::min(kMaxPut, n - begin));
      const MPI_Aint off = var_.data() + static_cast<MPI_Aint>(offset + begin);
      check(MPI_Put(static_cast<const char*>(in) + begin, bytes, MPI_BYTE, owner_, off, bytes,
                    MPI_BYTE, var_.win),
            "MPI_Put");
    }
  }

  std::shared_ptr<MpiContext> shared_;
  std::string op_name_;
  int owner_;
  std::string task_;
  DType dtype_;
  TensorShape shape_;
  MPI_Datatype type_;
  int64_t elements_;
  int64_t esize_;
  int64_t row_width_;
  MpiVar var_;
  MpiCallCheck check_;
  std::atomic<bool> initialized_{false};
  Tensor cached_;
  int64_t cached_version_ = -1;
  std::atomic<uint64_t> cache_copies_{0};
};

}  // namespace

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, static_cast<size_t>(len));
}

namespace {

MPI_Aint aligned(MPI_Aint bytes) {
  return (bytes + kVariableAlign - 1) / kVariableAlign * kVariableAlign;
}

// A barrier of every task polled with sleeps, checking every ~0.1 s that
// no task of this host has exited (UnavailableError naming it), so that a
// window is never created with a dead task: MPI_Win_allocate itself
// cannot be abandoned. The caller holds context.mu.
void live_barrier(MpiContext& context, const std::string& what, const MpiCheck& check) {
  MPI_Request request = MPI_REQUEST_NULL;
  {
    std::lock_guard lock(context.mu);
    check(MPI_Ibarrier(context.comm, &request), "MPI_Ibarrier before " + what);
  }
  for (int polls = 1;; ++polls) {
    int done = 0;
    {
      std::lock_guard lock(context.mu);
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test before " + what);
    }
    if (done) return;
    if (polls % 500 == 0) {
      try {
        check_peers_alive(context);
      } catch (const UnavailableError& e) {
        throw UnavailableError(what + ": " + e.what());
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Allocates one window for `storages` (collective): each rank's segment
// holds the variables it owns, 64-byte aligned and zeroed; then binds them.
// Every task is checked alive first (live_barrier): a task that died
// before the creation is an error, not a hang; one dying between that
// barrier and its MPI_Win_allocate (a window of microseconds) is left to
// the launcher. The caller does not hold context.mu: it is taken for each
// MPI call, so that this process's other threads (the keyed service of
// distributed/mpi_keyed_table.h, which other tasks may need before they
// reach the barrier) go on meanwhile.
void allocate_window(MpiContext& context, int rank,
                     const std::vector<std::shared_ptr<RemoteStorage>>& storages,
                     const MpiCheck& check) {
  MPI_Aint size_here = 0;
  for (const auto& s : storages) {
    const auto& m = static_cast<const MpiStorage&>(*s);
    if (m.owner() == rank) size_here += aligned(m.footprint());
  }
  const std::string what = quoted(static_cast<const MpiStorage&>(*storages[0]).var().op_name) +
                           (storages.size() > 1 ? " and the variables created with it" : "");
  live_barrier(context, "creating " + what, check);
  MPI_Win win = MPI_WIN_NULL;
  int64_t order = 0;
  {
    std::lock_guard lock(context.mu);
    void* base = nullptr;
    check(MPI_Win_allocate(size_here, 1, MPI_INFO_NULL, context.comm, &base, &win),
          "MPI_Win_allocate for " + what);
    context.windows.push_back(win);
    order = static_cast<int64_t>(context.windows.size()) - 1;
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    if (size_here > 0) {
      check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win), "MPI_Win_lock");
      std::memset(base, 0, static_cast<size_t>(size_here));
      check(MPI_Win_unlock(rank, win), "MPI_Win_unlock");
    }
  }
  // Nobody touches the window before its owners have zeroed the headers.
  live_barrier(context, "after creating " + what, check);
  // Each owner's offsets, computed alike on every rank from the same
  // sequence of variables.
  std::vector<MPI_Aint> running(context.task_names.size(), 0);
  for (size_t i = 0; i < storages.size(); ++i) {
    auto& m = static_cast<MpiStorage&>(*storages[i]);
    MPI_Aint& end = running[static_cast<size_t>(m.owner())];
    m.bind(win, order, end);
    end += aligned(m.footprint());
  }
}

}  // namespace

std::shared_ptr<RemoteStorage> create_mpi_storage(std::shared_ptr<MpiContext> context, int rank,
                                                  const std::string& op_name, int owner,
                                                  DType dtype, const TensorShape& shape,
                                                  const MpiCheck& check) {
  std::unique_lock lock(context->mu);
  if (!context->alive)
    throw UnavailableError("variable " + quoted(op_name) + ": the Cluster has shut down");
  auto storage = std::make_shared<MpiStorage>(context, op_name, owner, dtype, shape);
  if (context->batch_depth > 0) {
    context->pending.push_back(storage);
  } else {
    lock.unlock();
    allocate_window(*context, rank, {storage}, check);
  }
  return storage;
}

void begin_mpi_batch(MpiContext& context) {
  std::lock_guard lock(context.mu);
  ++context.batch_depth;
}

void end_mpi_batch(MpiContext& context, int rank, const MpiCheck& check) {
  std::unique_lock lock(context.mu);
  if (context.batch_depth == 0 || --context.batch_depth > 0) return;
  std::vector<std::shared_ptr<RemoteStorage>> pending = std::move(context.pending);
  context.pending.clear();
  if (pending.empty() || !context.alive) return;
  lock.unlock();
  allocate_window(context, rank, pending, check);
}

WireStats mpi_wire_stats(const MpiContext& context) { return context.stats(); }

int mpi_owner_rank(const RemoteStorage* storage) {
  const auto* mpi = dynamic_cast<const MpiStorage*>(storage);
  return mpi ? mpi->owner() : -1;
}

}  // namespace varstate::internal
