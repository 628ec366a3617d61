// A device-side index check whose error is deferred to the variable
// (varstate/variable.h, "Deferred update errors"): the protocol of the GPU
// scatters (runtime/scatter.cc) for the other sparse updates of a GPU
// variable whose indices are on its device (the sparse training ops).
// Runtime-internal.
//
//   DeferredIndexCheck check(var, device);          // serialized with var's
//   validate_indices(..., check.record(), ...);     //   scatters from here
//   kernel(..., check.record());                    // writes nothing past a bad index
//   check.commit(who, indices_shape, updates_shape, rows, synchronous);
//
// An error found on the device is raised by the variable's next read
// (value(), ref(), read_value(); eval() and sync() wait for it), or at once
// with `synchronous`, as a scatter's is.
#pragma once

#ifdef VARSTATE_HAVE_CUDA
#include <memory>
#include <mutex>
#include <string>

#include "kernels/cuda/scatter.h"
#include "varstate/device.h"
#include "varstate/tensor_shape.h"
#include "varstate/variable.h"

namespace varstate::internal {

class ScatterState;

class DeferredIndexCheck {
 public:
  // Holds the variable's scatter lock until commit() (or destruction) and
  // lends its device record on `device`; raises the errors of earlier
  // checks that have finished, before anything is enqueued.
  DeferredIndexCheck(const Variable& var, Device& device);
  // The same for a caller already holding `state`'s scatter lock (`serial`).
  DeferredIndexCheck(std::shared_ptr<ScatterState> state, std::unique_lock<std::mutex> serial,
                     Device& device);
  // Without commit(), the record goes back unused (its call failed).
  ~DeferredIndexCheck();
  DeferredIndexCheck(const DeferredIndexCheck&) = delete;
  DeferredIndexCheck& operator=(const DeferredIndexCheck&) = delete;

  // The device record: reset it, validate into it, pass it to the kernels.
  kernels::cuda::IndexCheck* record() const { return record_; }
  // After the checked work is enqueued on the device's stream: the record
  // is copied to the host behind it and its verdict deferred to the
  // variable (an error names `who`, the position by `indices_shape`, and
  // [0, rows)). Releases the lock; with `synchronous`, then waits for the
  // variable's pending checks and raises.
  void commit(std::string who, const TensorShape& indices_shape, const TensorShape& updates_shape,
              int64_t rows, bool synchronous);

 private:
  std::shared_ptr<ScatterState> state_;
  std::unique_lock<std::mutex> serial_;
  Device& device_;
  int slot_ = -1;
  void* host_ = nullptr;
  kernels::cuda::IndexCheck* record_ = nullptr;
};

}  // namespace varstate::internal
#endif
