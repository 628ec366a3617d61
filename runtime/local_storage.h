// The storage of a variable held by this process (runtime/variable_storage.h):
// one dense buffer on the variable's device (CPU or GPU), updated in place
// by the CPU (Eigen) and CUDA kernels. Runtime-internal.
//
// It keeps the value and what goes with it: the shape (which a whole-value
// assign of another shape may change, validate_shape=false), whether it is
// initialized, the version, the dirty rows of incremental saves, and the
// caching device's copy. `mu_` guards the handle, shape and flag, not the
// buffer's bytes: writers in place hold the variable's update lock when
// use_locking says so (varstate/update_options.h), as TensorFlow's ref
// variables do.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/dirty_rows.h"
#include "runtime/variable_storage.h"
#include "varstate/device.h"

namespace varstate::internal {

class LocalStorage final : public VariableStorage {
 public:
  // An uninitialized buffer of `dtype` and `shape` on `device`;
  // `validate_shape`: the variable's (false lets assign change the shape).
  LocalStorage(DType dtype, TensorShape shape, Device& device, bool validate_shape)
      : dtype_(dtype), device_(device), validate_shape_(validate_shape), shape_(std::move(shape)) {}

  const std::string& holder() const override;
  bool updates_in_place() const override { return true; }

  bool is_initialized() override;
  uint64_t version() override { return version_.load(); }
  uint64_t cache_copies() const override { return cache_copies_.load(); }
  TensorShape shape() const override;

  Tensor read_live(const Variable& self) override;
  Tensor read_copy(const Variable& self) override { return read_live(self).clone(); }
  Tensor read_cached(const Variable& self, Device* caching_device) override;
  std::optional<Tensor> read_if_initialized(const Variable& self) override;
  Tensor copy_for_save(const Variable& self, const std::vector<int64_t>* rows) override;

  Tensor assign_value(Variable& self, const Tensor& value, bool validate_shape) override;
  void replace_value(Variable& self, const Tensor& value) override;
  void replace_rows(Variable& self, const std::vector<RowBytes>& runs) override;
  Tensor add_value(Variable& self, const Tensor& delta, bool negate) override;
  Tensor assign_slice(Variable& self, const std::vector<SliceSpec>& specs,
                      const Tensor& value) override;
  Tensor count_up(Variable& self, int64_t limit) override;
  void note_write(bool all_rows) override {
    if (all_rows) dirty_.mark_all();
    version_.fetch_add(1);
  }

  // runtime/scatter.cc's local scatter: validation, dirty rows, the kernel.
  Tensor scatter(kernels::ScatterOp op, Variable& self, const Tensor& indices,
                 const Tensor& updates, const UpdateOptions& options, const std::string& who,
                 bool read_back) override;
  Tensor gather(const Variable& self, const std::vector<int64_t>& rows) override;

  // One part after another (each part's own scatter or gather).
  void scatter_parts(kernels::ScatterOp op, std::vector<StoragePart>& parts, bool updates_scalar,
                     const UpdateOptions& options) override;
  void gather_parts(std::vector<StoragePart>& parts) override;
  // Every update's rows gathered to the host (or the whole values), every
  // `fn` run, then the rows written back in place and logged as dirty. No
  // update lock is taken (the storages know no variable handle).
  void modify_rows(std::vector<RowsUpdate>& updates) override;

  DirtyRows& dirty_rows() override { return dirty_; }
  // Local writes always mark (from the first take on): nothing to start.
  void start_marking() override {}
  std::vector<int64_t> take_marked_rows() override;

 private:
  // Marks the rows along axis 0 that `specs` select (VariableSlice::assign).
  void mark_slice_rows(const std::vector<SliceSpec>& specs, const TensorShape& shape);

  const DType dtype_;
  Device& device_;
  const bool validate_shape_;

  mutable std::mutex mu_;
  Tensor value_;
  TensorShape shape_;
  bool initialized_ = false;
  std::atomic<uint64_t> version_{0};
  // Rows changed since the last save that took them (incremental saves).
  DirtyRows dirty_;
  // The generation of take_marked_rows' last take (its one taker).
  uint64_t marked_generation_ = 0;

  // The caching device's copy.
  std::mutex cache_mu_;
  Tensor cached_;
  uint64_t cached_version_ = ~uint64_t{0};
  std::atomic<uint64_t> cache_copies_{0};
};

}  // namespace varstate::internal
