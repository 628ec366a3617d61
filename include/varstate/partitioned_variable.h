// PartitionedVariable: one logical variable stored as shards ("parts")
// along one axis, as get_variable creates it with a partitioner
// (varstate/variable_scope.h, varstate/partitioners.h).
//
//   PartitionedVariable emb = get_variable(
//       "emb", {.shape = {4'000'000, 64}, .partitioner = fixed_size_partitioner(4)});
//   // parts "emb/part_0" ... "emb/part_3", rows 0..999999, 1000000.., ...
//   emb.scatter_add(IndexedSlices(grads, ids));   // each row goes to its shard
//   Tensor all = emb.as_tensor();                 // the parts concatenated
//
// Each part is an ordinary Variable named "<name>/part_<i>" in the graph's
// collections, carrying its SaveSliceInfo (full name, full shape, offset,
// shape); a Saver stores the parts as slices of one full tensor named
// <name>, restorable into any other partitioning. Dimension `axis` of
// size d is split in n parts as TensorFlow does: the first d % n parts get
// d / n + 1 slices, the others d / n.
//
// Devices: each part is placed like any variable, by the device scope
// current when it is created; a device function (e.g. round_robin_gpus())
// puts the parts on different devices. Reads concatenate on one device of
// the caller's choice; updates run on each part's device.
//
// Updates validate everything first (shapes, dtypes, initialization of
// every part, every index) and only then touch the parts, so a call that
// throws changed nothing. Concurrent updates of different parts are
// independent; each part follows Variable's thread-safety rules.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "varstate/indexed_slices.h"
#include "varstate/placement.h"
#include "varstate/scatter.h"
#include "varstate/session.h"
#include "varstate/tensor.h"
#include "varstate/tensor_shape.h"
#include "varstate/update_options.h"
#include "varstate/variable.h"

namespace varstate {

class PartitionedVariable {
 public:
  // Wraps existing parts (in order along `axis`) of a variable named
  // `name` (no ":0") of `shape`. Throws ValueError when the parts' dtypes
  // differ from `dtype`, their shapes do not tile `shape` along one axis,
  // `partitions` (one count per dimension) does not match them, or a
  // Variable is given twice (naming it and its two positions).
  PartitionedVariable(std::string name, const TensorShape& shape, DType dtype,
                      std::vector<Variable> parts, std::vector<int64_t> partitions);

  const std::string& name() const;  // the full name, e.g. "scope/emb"
  DType dtype() const;
  TensorShape shape() const;
  TensorShape get_shape() const { return shape(); }
  // The partition count per dimension (TensorFlow's _get_partitions()).
  const std::vector<int64_t>& partitions() const;
  // The partitioned dimension (0 when there is a single part).
  int axis() const;
  // The parts, in order along axis(); part i starts at offsets()[i].
  const std::vector<Variable>& variables() const;
  size_t size() const { return variables().size(); }
  const Variable& operator[](size_t i) const { return variables()[i]; }
  auto begin() const { return variables().begin(); }
  auto end() const { return variables().end(); }
  const std::vector<int64_t>& offsets() const;
  // An Op running every part's initializer.
  Op initializer() const;

  // --- reads ----------------------------------------------------------------
  // The parts concatenated along axis() into one tensor on `device`
  // (parts on other devices are copied there). Without a device: the device
  // the current device scope picks. FailedPreconditionError if a part is
  // uninitialized.
  Tensor as_tensor(Device& device) const;
  Tensor as_tensor() const;
  Tensor value() const { return as_tensor(); }
  operator Tensor() const { return as_tensor(); }  // NOLINT: implicit as in TF
  // The value copied to the host, through `session` or the default session
  // (FailedPreconditionError when there is none), as Variable::eval.
  Tensor eval(const Session& session) const;
  Tensor eval() const;

  // --- dense updates ----------------------------------------------------------
  // `value` has the full shape (or, for assign_add/assign_sub, is a
  // scalar applied to every element); each part receives its slice.
  // Errors and messages are Variable's for the same mistake: ValueError
  // for another shape (Assign to "emb": shapes must match: target shape
  // [10,4], value shape [9,4]), TypeError for a dtype that does not
  // convert. Options (varstate/update_options.h): use_locking
  // (unset = false) applies to each part; the shape cannot change, whatever
  // validate_shape says.
  void assign(const Tensor& value, const UpdateOptions& options = {});
  void assign_add(const Tensor& delta, const UpdateOptions& options = {});
  void assign_sub(const Tensor& delta, const UpdateOptions& options = {});

  // --- sparse updates ---------------------------------------------------------
  // As the scatter ops of varstate/scatter.h on the full variable: row
  // indices[p] of the whole variable (op)= updates[p]. Each index is routed
  // to the part that holds its row and re-based to that part (the parts
  // are updated in order; duplicates within a part follow the scatter op's
  // rules). Requires partitioning along axis 0 (InvalidArgumentError
  // otherwise). The checks, classes and messages are those of a scatter on
  // one Variable of the full shape (varstate/scatter.h): ValueError for the
  // updates' shape; every index is checked against the full variable's
  // rows before any part is written: InvalidArgumentError("scatter_add on
  // \"emb\": indices[3] = 1000 is not in [0, 500)"). With IndexedSlices,
  // their dense_shape, when given, must be the variable's shape
  // (InvalidArgumentError).
  void scatter_update(const Tensor& indices, const Tensor& updates,
                      const UpdateOptions& options = {});
  void scatter_add(const Tensor& indices, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_sub(const Tensor& indices, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_mul(const Tensor& indices, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_div(const Tensor& indices, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_min(const Tensor& indices, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_max(const Tensor& indices, const Tensor& updates, const UpdateOptions& options = {});
  void scatter_update(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  void scatter_add(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  void scatter_sub(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  void scatter_mul(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  void scatter_div(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  void scatter_min(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});
  void scatter_max(const IndexedSlices& sparse_delta, const UpdateOptions& options = {});

  // Handle identity: true if both refer to the same partitioned variable.
  bool same_as(const PartitionedVariable& other) const { return state_ == other.state_; }

 private:
  struct State;
  std::shared_ptr<const State> state_;
};

// A device function that places each variable on the next GPU of this
// process in turn (GPU:0, GPU:1, ..., then GPU:0 again), or on CPU:0 when
// there is no GPU: use it in a DeviceScope around get_variable to spread a
// partitioned variable's parts over the GPUs. Each returned function keeps
// its own counter.
DeviceFunction round_robin_gpus();

}  // namespace varstate
