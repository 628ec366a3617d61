// A gate on a CUDA stream, for GPU tests that need work to be still queued
// when the host looks: a host function enqueued on the stream holds
// everything enqueued after it until open(). Real GPUs and the emulated ones
// (cuda_emulation/) run it alike. The hold is bounded: a test whose calls
// wait on the gated stream (a deadlock with the gate open() would lift)
// resumes after `limit` and sees timed_out().
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

namespace varstate::testing {

class StreamGate {
 public:
  explicit StreamGate(cudaStream_t stream,
                      std::chrono::milliseconds limit = std::chrono::seconds(30))
      : state_(std::make_shared<State>()) {
    state_->limit = limit;
    // The host function owns a reference: it may run after the gate is gone.
    auto* ref = new std::shared_ptr<State>(state_);
    const cudaError_t err = cudaLaunchHostFunc(stream, &StreamGate::hold, ref);
    if (err != cudaSuccess) {
      delete ref;
      throw std::runtime_error(std::string("cudaLaunchHostFunc: ") + cudaGetErrorString(err));
    }
  }
  ~StreamGate() { open(); }
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Lets the stream run on.
  void open() {
    std::lock_guard lock(state_->mu);
    state_->open = true;
    state_->cv.notify_all();
  }

  // Whether the hold ended by its limit rather than by open(); known once
  // the stream has passed the gate (after open() and a stream sync).
  bool timed_out() const {
    std::lock_guard lock(state_->mu);
    return state_->timed_out;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    bool timed_out = false;
    std::chrono::milliseconds limit{};
  };

  static void CUDART_CB hold(void* user_data) {
    std::unique_ptr<std::shared_ptr<State>> ref(static_cast<std::shared_ptr<State>*>(user_data));
    State& s = **ref;
    std::unique_lock lock(s.mu);
    s.timed_out = !s.cv.wait_for(lock, s.limit, [&] { return s.open; });
  }

  std::shared_ptr<State> state_;
};

}  // namespace varstate::testing
