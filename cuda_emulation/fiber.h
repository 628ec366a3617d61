// Fibers for the threads of an emulated block (cuda_emulation/kernel_launch.cc):
// each has its own stack (with a guard page below it) and runs on the host
// thread that resumes it until it yields or its entry function returns.
// Switching saves only the callee-saved registers (x86-64; elsewhere
// ucontext), so a __syncthreads() costs tens of nanoseconds. Switches are
// announced to AddressSanitizer, which then checks each fiber's stack as a
// stack.
#pragma once

#include <cstddef>

namespace varstate::cuda_emulation {

class Fiber {
 public:
  Fiber();
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // The next resume() runs entry() from the start of the stack.
  void start(void (*entry)());
  // From the host thread: runs the fiber until it yields or entry returns.
  void resume();
  // From inside the fiber: back to the resume() that ran it.
  void yield();
  // For a fiber left suspended for good (its kernel faulted): the stack is
  // made ready for a fresh start (AddressSanitizer's redzones of the frames
  // it never returned from are cleared).
  void abandon();

 private:
  static void trampoline();

  char* stack_ = nullptr;  // lowest address of the mapping (a guard page)
  size_t size_ = 0;
  void* sp_ = nullptr;
  void (*entry_)() = nullptr;
  void* fake_stack_ = nullptr;  // AddressSanitizer's, while suspended
#if !(defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT))
  void* context_ = nullptr;  // ucontext_t
#endif
};

}  // namespace varstate::cuda_emulation
