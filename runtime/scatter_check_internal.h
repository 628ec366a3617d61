// Runtime-internal: the device-side checks of the scatter ops (runtime/
// scatter.cc). A scatter on the GPU whose indices (or integer divisors) were
// not checked on the host enqueues a check kernel that writes an IndexCheck
// record; its result is copied to pinned host memory and read back later.
//  - Variables: ScatterState keeps, per variable, the device record, the
//    pinned host slots and the checks in flight, whose errors the next call
//    on the variable raises.
//  - Plain tensors: the call waits for its check; CheckRecordPool lends it a
//    device record and host buffer, reused across calls.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/variable_access.h"
#include "varstate/device.h"
#include "varstate/tensor_shape.h"
#include "varstate/variable.h"
#ifdef VARSTATE_HAVE_CUDA
#include "kernels/cuda/scatter.h"
#endif

namespace varstate::internal {

// "<who>: indices[1,0] = 7 is not in [0, 5)"
std::string bad_index_message(const std::string& who, int64_t position,
                              const TensorShape& indices_shape, int64_t value, int64_t rows);
// "<who>: updates[3] is 0 (integer division by zero)"
std::string zero_divisor_message(const std::string& who, int64_t position,
                                 const TensorShape& updates_shape);

// The error a finished device check recorded, or "" if none. `record` is
// the IndexCheck copied to the host.
std::string check_error(const void* record, const std::string& who,
                        const TensorShape& indices_shape, const TensorShape& updates_shape,
                        int64_t rows);

// Per-variable state: the scatter lock and the GPU checks in flight.
class ScatterState final : public internal::VariableUpdateState {
 public:
  ~ScatterState() override;

  // Serializes scatters on the variable.
  std::mutex& mutex() { return mu_; }

  void raise_pending_errors(bool wait) override;

#ifdef VARSTATE_HAVE_CUDA
  // A free host slot for the next check (waiting for the oldest check when
  // all are in flight) and the device record; raises errors found meanwhile
  // before anything of the new call is enqueued. Call with mutex() held.
  struct Slot {
    int index;
    void* host;
    kernels::cuda::IndexCheck* check;
  };
  Slot acquire(Device& device);
  void release(int slot);
  void push(int slot, std::shared_ptr<Event> event, std::string who, TensorShape indices_shape,
            TensorShape updates_shape, int64_t rows);
#endif

 private:
  struct Pending {
    int slot;
    std::shared_ptr<Event> event;
    std::string who;
    TensorShape indices_shape;
    TensorShape updates_shape;
    int64_t rows;
  };

  // Moves the finished checks (all, with `wait`) from pending_ to errors_.
  void collect(bool wait, std::unique_lock<std::mutex>& lock);
  void collect_oldest(std::unique_lock<std::mutex>&);
  void raise_collected();

  std::mutex mu_;
  std::mutex pending_mu_;
  std::deque<Pending> pending_;
  std::vector<int> free_;
  std::vector<std::string> errors_;
  PinnedBuffer host_;
  Device* device_ = nullptr;
  void* check_ = nullptr;
};

// The variable's ScatterState, created on first use.
std::shared_ptr<ScatterState> scatter_state(const Variable& ref);

#ifdef VARSTATE_HAVE_CUDA
// A device check record and the pinned host buffer its result is copied to.
struct CheckRecord {
  Device* device = nullptr;
  kernels::cuda::IndexCheck* check = nullptr;
  PinnedBuffer host;
};

// The check records of plain-tensor scatters, per device. take() lends a
// free record (allocating one when all are lent: one per concurrent call);
// give_back() returns it once the device no longer uses it (the caller has
// waited for the copy of its result). A record whose call failed is
// discarded with discard() instead, as its device work may still be queued.
// Thread-safe; records live until exit.
class CheckRecordPool {
 public:
  static CheckRecordPool& instance();
  std::unique_ptr<CheckRecord> take(Device& device);
  void give_back(std::unique_ptr<CheckRecord> record);
  static void discard(std::unique_ptr<CheckRecord> record);

 private:
  std::mutex mu_;
  std::map<const Device*, std::vector<std::unique_ptr<CheckRecord>>> free_;
};

// A device check waited for at once (plain-tensor scatters, gathers): lends
// a record on `device`, runs `enqueue` with it (the work that validates into
// it and honours it, on the device's stream), waits for the record's copy
// and returns check_error's message for it ("" when clean).
std::string check_now(Device& device,
                      const std::function<void(kernels::cuda::IndexCheck*)>& enqueue,
                      const std::string& who, const TensorShape& indices_shape,
                      const TensorShape& updates_shape, int64_t rows);
#endif

}  // namespace varstate::internal
