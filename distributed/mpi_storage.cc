#include "distributed/mpi_storage.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>

#include "runtime/gather_internal.h"
#include "varstate/dense_update.h"
#include "varstate/device_manager.h"
#include "varstate/error.h"
#include "varstate/scatter.h"

namespace varstate::internal {
namespace {

using kernels::ScatterOp;

// The owner's window: a 16-byte header (int64 initialized flag, int64
// version counter), then the value's bytes.
constexpr MPI_Aint kFlagOffset = 0;
constexpr MPI_Aint kVersionOffset = 8;
constexpr MPI_Aint kDataOffset = 16;
// Elements per MPI call (counts are ints).
constexpr int64_t kChunk = int64_t{1} << 28;

// The MPI type of a dtype's elements, or MPI_DATATYPE_NULL when MPI has
// none (float16, bfloat16, string): such variables move as bytes and are
// updated by read-modify-write under an exclusive lock.
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat:
      return MPI_FLOAT;
    case DType::kDouble:
      return MPI_DOUBLE;
    case DType::kInt8:
    case DType::kQInt8:
      return MPI_INT8_T;
    case DType::kInt16:
    case DType::kQInt16:
      return MPI_INT16_T;
    case DType::kInt32:
    case DType::kQInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kUInt8:
    case DType::kQUInt8:
      return MPI_UINT8_T;
    case DType::kUInt16:
    case DType::kQUInt16:
      return MPI_UINT16_T;
    case DType::kUInt32:
      return MPI_UINT32_T;
    case DType::kUInt64:
      return MPI_UINT64_T;
    case DType::kComplex64:
      return MPI_C_FLOAT_COMPLEX;
    case DType::kComplex128:
      return MPI_C_DOUBLE_COMPLEX;
    case DType::kBool:
      return MPI_C_BOOL;
    default:
      return MPI_DATATYPE_NULL;
  }
}

// Passive-target access epoch on one target, unlocked on scope exit.
class Epoch {
 public:
  Epoch(MPI_Win win, int lock_type, int target, const std::function<void(int, const char*)>& check)
      : win_(win), target_(target), check_(check) {
    check_(MPI_Win_lock(lock_type, target, 0, win), "MPI_Win_lock");
    open_ = true;
  }
  ~Epoch() {
    if (open_) MPI_Win_unlock(target_, win_);
  }
  void flush() { check_(MPI_Win_flush(target_, win_), "MPI_Win_flush"); }
  void close() {
    open_ = false;
    check_(MPI_Win_unlock(target_, win_), "MPI_Win_unlock");
  }

 private:
  MPI_Win win_;
  int target_;
  const std::function<void(int, const char*)>& check_;
  bool open_ = false;
};

class MpiStorage final : public internal::RemoteStorage {
 public:
  MpiStorage(std::shared_ptr<MpiContext> shared, std::string op_name, int owner, DType dtype,
             TensorShape shape, MPI_Win win)
      : shared_(std::move(shared)),
        op_name_(std::move(op_name)),
        owner_(owner),
        task_(shared_->task_names[static_cast<size_t>(owner)]),
        dtype_(dtype),
        shape_(std::move(shape)),
        win_(win),
        type_(mpi_type(dtype)),
        elements_(shape_.num_elements()),
        esize_(static_cast<int64_t>(dtype_size(dtype))),
        row_width_(shape_.rank() >= 1 ? shape_.tail(1).num_elements() : 1) {
    check_ = [this](int rc, const char* what) { check(rc, what); };
  }

  const std::string& task() const override { return task_; }
  int owner() const { return owner_; }

  bool is_initialized() override {
    if (initialized_.load()) return true;
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(win_, MPI_LOCK_SHARED, owner_, check_);
    const bool init = fetch(e, kFlagOffset) != 0;
    e.close();
    if (init) initialized_.store(true);
    return init;
  }

  uint64_t version() override {
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(win_, MPI_LOCK_SHARED, owner_, check_);
    const int64_t v = fetch(e, kVersionOffset);
    e.close();
    return static_cast<uint64_t>(v);
  }

  uint64_t cache_copies() const override { return cache_copies_.load(); }

  Tensor read(bool cached) override {
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(win_, MPI_LOCK_SHARED, owner_, check_);
    if (!initialized_.load()) {
      if (fetch(e, kFlagOffset) == 0) {
        e.close();
        throw FailedPreconditionError("Attempting to use uninitialized value " + op_name_);
      }
      initialized_.store(true);
    }
    int64_t version = 0;
    if (cached) {
      version = fetch(e, kVersionOffset);
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
    if (type_ != MPI_DATATYPE_NULL) {
      // Element-wise atomic with respect to concurrent accumulates.
      Epoch e(win_, MPI_LOCK_SHARED, owner_, check_);
      accumulate_all(value.raw_data(), MPI_REPLACE);
      mark(e, /*initialize=*/true);
      e.close();
    } else {
      Epoch e(win_, MPI_LOCK_EXCLUSIVE, owner_, check_);
      put_all(value.raw_data());
      e.flush();
      mark(e, /*initialize=*/true);
      e.close();
    }
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
      Epoch e(win_, MPI_LOCK_SHARED, owner_, check_);
      for (int64_t begin = 0; begin < elements_; begin += kChunk) {
        const int n = static_cast<int>(std::min(kChunk, elements_ - begin));
        const MPI_Aint off = kDataOffset + static_cast<MPI_Aint>(begin * esize_);
        check(MPI_Get_accumulate(byte_at(d.raw_data(), begin), n, type_,
                                 byte_at(old.raw_data(), begin), n, type_, owner_, off, n, type_,
                                 MPI_SUM, win_),
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
    Epoch e(win_, MPI_LOCK_EXCLUSIVE, owner_, check_);
    get_all(t.raw_data());
    e.flush();
    fn(t);
    put_all(t.raw_data());
    e.flush();
    mark(e, /*initialize=*/false);
    e.close();
    return t;
  }

  void scatter(ScatterOp op, const std::vector<int64_t>& rows, const Tensor& updates,
               bool updates_scalar) override {
    // The distinct rows, ascending, and each index's position among them.
    std::vector<int64_t> unique = rows;
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    std::vector<int64_t> local(rows.size());
    std::vector<int64_t> first(unique.size(), -1);
    for (size_t p = 0; p < rows.size(); ++p) {
      const auto j = std::lower_bound(unique.begin(), unique.end(), rows[p]) - unique.begin();
      local[p] = j;
      if (first[static_cast<size_t>(j)] < 0)
        first[static_cast<size_t>(j)] = static_cast<int64_t>(p);
    }
    const int64_t n = static_cast<int64_t>(rows.size());
    const int64_t u = static_cast<int64_t>(unique.size());
    Device& cpu = DeviceManager::instance().cpu();
    const TensorShape row_shape = shape_.tail(1);
    const TensorShape compact_shape = TensorShape({u}).concatenate(row_shape);
    const Tensor flat =
        updates_scalar ? updates : updates.reshaped(TensorShape({n}).concatenate(row_shape));
    const Tensor local_indices = Tensor::from_vector<int64_t>(local);
    // The touched rows of the owner's window, as one datatype.
    MPI_Datatype rows_type = row_datatype(unique);
    struct TypeGuard {
      MPI_Datatype* t;
      ~TypeGuard() { MPI_Type_free(t); }
    } guard{&rows_type};

    const bool accumulate = type_ != MPI_DATATYPE_NULL && op != ScatterOp::kDiv &&
                            dtype_ != DType::kHalf && dtype_ != DType::kBFloat16;
    if (accumulate) {
      // Combine the duplicates of each row locally, then one accumulate.
      Tensor compact;
      MPI_Op mpi_op = MPI_REPLACE;
      switch (op) {
        case ScatterOp::kAdd:
        case ScatterOp::kSub:
          compact = Tensor::zeros(dtype_, compact_shape, cpu);
          mpi_op = MPI_SUM;
          break;
        case ScatterOp::kMul:
          compact = Tensor::filled(dtype_, compact_shape,
                                   convert_to_dtype(Tensor(1), dtype_, op_name_), cpu);
          mpi_op = MPI_PROD;
          break;
        default:  // update, min, max: start from each row's first update
          compact = updates_scalar ? Tensor::filled(dtype_, compact_shape, updates, cpu)
                                   : internal::gather_rows(flat, first);
          mpi_op = op == ScatterOp::kMin ? MPI_MIN : op == ScatterOp::kMax ? MPI_MAX : MPI_REPLACE;
          break;
      }
      apply_local(op, compact, local_indices, flat);
      std::lock_guard lock(shared_->mu);
      alive();
      Epoch e(win_, MPI_LOCK_SHARED, owner_, check_);
      check(MPI_Accumulate(compact.raw_data(), static_cast<int>(u * row_width_), type_, owner_, 0,
                           1, rows_type, mpi_op, win_),
            "MPI_Accumulate");
      mark(e, /*initialize=*/false);
      e.close();
      return;
    }
    // Read-modify-write of the touched rows under the exclusive lock: exact
    // for integer division and for dtypes MPI cannot add.
    Tensor compact(dtype_, compact_shape, cpu);
    const MPI_Datatype origin = type_ != MPI_DATATYPE_NULL ? type_ : MPI_BYTE;
    const int count = static_cast<int>(u * row_width_ * (type_ != MPI_DATATYPE_NULL ? 1 : esize_));
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(win_, MPI_LOCK_EXCLUSIVE, owner_, check_);
    check(MPI_Get(compact.raw_data(), count, origin, owner_, 0, 1, rows_type, win_), "MPI_Get");
    e.flush();
    apply_local(op, compact, local_indices, flat);
    check(MPI_Put(compact.raw_data(), count, origin, owner_, 0, 1, rows_type, win_), "MPI_Put");
    e.flush();
    mark(e, /*initialize=*/false);
    e.close();
  }

  int64_t count_up_to(int64_t limit, const std::string& op_name) override {
    std::lock_guard lock(shared_->mu);
    alive();
    Epoch e(win_, MPI_LOCK_SHARED, owner_, check_);
    const MPI_Datatype t = dtype_ == DType::kInt32 ? MPI_INT32_T : MPI_INT64_T;
    for (;;) {
      int64_t current = 0;
      int32_t current32 = 0;
      void* cur = dtype_ == DType::kInt32 ? static_cast<void*>(&current32) : &current;
      check(MPI_Fetch_and_op(nullptr, cur, t, owner_, kDataOffset, MPI_NO_OP, win_),
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
        check(MPI_Compare_and_swap(&next32, &current32, &seen32, t, owner_, kDataOffset, win_),
              "MPI_Compare_and_swap");
      } else {
        check(MPI_Compare_and_swap(&next, &current, &seen, t, owner_, kDataOffset, win_),
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
    check(MPI_Fetch_and_op(nullptr, &value, MPI_INT64_T, owner_, offset, MPI_NO_OP, win_),
          "MPI_Fetch_and_op");
    e.flush();
    return value;
  }
  // Bumps the version (and sets the initialized flag): ordered after the
  // update's accumulates by MPI's default accumulate ordering.
  void mark(Epoch&, bool initialize) {
    const int64_t one = 1;
    int64_t ignored = 0;
    if (initialize) {
      check(MPI_Fetch_and_op(&one, &ignored, MPI_INT64_T, owner_, kFlagOffset, MPI_REPLACE, win_),
            "MPI_Fetch_and_op");
    }
    check(
        MPI_Accumulate(&one, 1, MPI_INT64_T, owner_, kVersionOffset, 1, MPI_INT64_T, MPI_SUM, win_),
        "MPI_Accumulate");
  }

  void get_all(void* out) {
    for (int64_t begin = 0; begin < elements_; begin += kChunk) {
      const int64_t n = std::min(kChunk, elements_ - begin);
      const MPI_Aint off = kDataOffset + static_cast<MPI_Aint>(begin * esize_);
      if (type_ != MPI_DATATYPE_NULL) {
        // Element-wise atomic with respect to concurrent accumulates.
        check(MPI_Get_accumulate(nullptr, 0, type_, byte_at(out, begin), static_cast<int>(n), type_,
                                 owner_, off, static_cast<int>(n), type_, MPI_NO_OP, win_),
              "MPI_Get_accumulate");
      } else {
        const int bytes = static_cast<int>(n * esize_);
        check(MPI_Get(byte_at(out, begin), bytes, MPI_BYTE, owner_, off, bytes, MPI_BYTE, win_),
              "MPI_Get");
      }
    }
  }
  void put_all(const void* in) {
    for (int64_t begin = 0; begin < elements_; begin += kChunk) {
      const int bytes = static_cast<int>(std::min(kChunk, elements_ - begin) * esize_);
      const MPI_Aint off = kDataOffset + static_cast<MPI_Aint>(begin * esize_);
      check(MPI_Put(byte_at(in, begin), bytes, MPI_BYTE, owner_, off, bytes, MPI_BYTE, win_),
            "MPI_Put");
    }
  }
  void accumulate_all(const void* in, MPI_Op op) {
    for (int64_t begin = 0; begin < elements_; begin += kChunk) {
      const int n = static_cast<int>(std::min(kChunk, elements_ - begin));
      const MPI_Aint off = kDataOffset + static_cast<MPI_Aint>(begin * esize_);
      check(MPI_Accumulate(byte_at(in, begin), n, type_, owner_, off, n, type_, op, win_),
            "MPI_Accumulate");
    }
  }

  // Rows `unique` (ascending) of the window, each row_width_ elements.
  MPI_Datatype row_datatype(const std::vector<int64_t>& unique) {
    std::vector<MPI_Aint> displacements(unique.size());
    for (size_t i = 0; i < unique.size(); ++i) {
      displacements[i] = kDataOffset + static_cast<MPI_Aint>(unique[i] * row_width_ * esize_);
    }
    const bool typed = type_ != MPI_DATATYPE_NULL;
    MPI_Datatype t = MPI_DATATYPE_NULL;
    check(MPI_Type_create_hindexed_block(static_cast<int>(unique.size()),
                                         static_cast<int>(typed ? row_width_ : row_width_ * esize_),
                                         displacements.data(), typed ? type_ : MPI_BYTE, &t),
          "MPI_Type_create_hindexed_block");
    check(MPI_Type_commit(&t), "MPI_Type_commit");
    return t;
  }

  // The single-process scatter of `op` on the compact rows.
  void apply_local(ScatterOp op, Tensor& compact, const Tensor& indices, const Tensor& updates) {
    const UpdateOptions o{.name = op_name_};
    switch (op) {
      case ScatterOp::kUpdate:
        varstate::scatter_update(compact, indices, updates, o);
        break;
      case ScatterOp::kAdd:
        varstate::scatter_add(compact, indices, updates, o);
        break;
      case ScatterOp::kSub:
        varstate::scatter_sub(compact, indices, updates, o);
        break;
      case ScatterOp::kMul:
        varstate::scatter_mul(compact, indices, updates, o);
        break;
      case ScatterOp::kDiv:
        varstate::scatter_div(compact, indices, updates, o);
        break;
      case ScatterOp::kMin:
        varstate::scatter_min(compact, indices, updates, o);
        break;
      case ScatterOp::kMax:
        varstate::scatter_max(compact, indices, updates, o);
        break;
    }
  }

  std::shared_ptr<MpiContext> shared_;
  std::string op_name_;
  int owner_;
  std::string task_;
  DType dtype_;
  TensorShape shape_;
  MPI_Win win_;
  MPI_Datatype type_;
  int64_t elements_;
  int64_t esize_;
  int64_t row_width_;
  std::function<void(int, const char*)> check_;
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

std::shared_ptr<RemoteStorage> create_mpi_storage(std::shared_ptr<MpiContext> context, int rank,
                                                  const std::string& op_name, int owner,
                                                  DType dtype, const TensorShape& shape,
                                                  const MpiCheck& check) {
  const int64_t bytes = shape.num_elements() * static_cast<int64_t>(dtype_size(dtype));
  std::lock_guard lock(context->mu);
  if (!context->alive)
    throw UnavailableError("variable " + quoted(op_name) + ": the Cluster has shut down");
  void* base = nullptr;
  MPI_Win win = MPI_WIN_NULL;
  const MPI_Aint size_here = rank == owner ? kDataOffset + bytes : 0;
  check(MPI_Win_allocate(size_here, 1, MPI_INFO_NULL, context->comm, &base, &win),
        "MPI_Win_allocate for " + quoted(op_name));
  context->windows.push_back(win);
  MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
  if (rank == owner) {
    check(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win), "MPI_Win_lock");
    std::memset(base, 0, static_cast<size_t>(kDataOffset + bytes));
    check(MPI_Win_unlock(rank, win), "MPI_Win_unlock");
  }
  // Nobody touches the window before its owner has zeroed the header.
  check(MPI_Barrier(context->comm), "MPI_Barrier after creating " + quoted(op_name));
  return std::make_shared<MpiStorage>(std::move(context), op_name, owner, dtype, shape, win);
}

int mpi_owner_rank(const RemoteStorage* storage) {
  const auto* mpi = dynamic_cast<const MpiStorage*>(storage);
  return mpi ? mpi->owner() : -1;
}

}  // namespace varstate::internal
