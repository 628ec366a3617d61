#include "cuda_emulation/fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#if !(defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT))
#include <ucontext.h>
#endif

#include "cuda_emulation/asan.h"
#ifdef VARSTATE_EMULATION_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT)
// varstate_emulation_switch(save, load): pushes the callee-saved registers,
// stores the stack pointer to *save, loads `load` as the stack pointer and
// pops the registers saved there.
extern "C" void varstate_emulation_switch(void** save, void* load);
asm(R"(
  .text
  .globl varstate_emulation_switch
  .hidden varstate_emulation_switch
  .type varstate_emulation_switch, @function
varstate_emulation_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size varstate_emulation_switch, .-varstate_emulation_switch
  .section .note.GNU-stack,"",@progbits
  .text
)");
#endif

namespace varstate::cuda_emulation {
namespace {

#ifdef VARSTATE_EMULATION_ASAN
constexpr size_t kStackBytes = size_t{512} << 10;  // AddressSanitizer's frames are larger
#else
constexpr size_t kStackBytes = size_t{128} << 10;
#endif

// The host thread's side of the switches.
struct Scheduler {
  Fiber* running = nullptr;
  void* sp = nullptr;
#if !(defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT))
  ucontext_t context;
#endif
  const void* stack_bottom = nullptr;  // for AddressSanitizer
  size_t stack_size = 0;
};
thread_local Scheduler scheduler;

size_t page_size() {
  static const auto bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes;
}

void start_switch(void** fake_stack_save, const void* bottom, size_t size) {
#ifdef VARSTATE_EMULATION_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

void finish_switch(void* fake_stack, const void** bottom_old, size_t* size_old) {
#ifdef VARSTATE_EMULATION_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, bottom_old, size_old);
#else
  (void)fake_stack, (void)bottom_old, (void)size_old;
#endif
}

}  // namespace

Fiber::Fiber() {
  size_ = kStackBytes + page_size();
  void* map = mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (map == MAP_FAILED) {
    std::perror("varstate: emulated GPU: a fiber stack");
    std::abort();
  }
  stack_ = static_cast<char*>(map);
  mprotect(stack_, page_size(), PROT_NONE);  // overflow faults instead of corrupting
#if !(defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT))
  context_ = new ucontext_t;
#endif
}

Fiber::~Fiber() {
#ifdef VARSTATE_EMULATION_ASAN
  // Memory mapped here later must not inherit this stack's redzones.
  ASAN_UNPOISON_MEMORY_REGION(stack_ + page_size(), size_ - page_size());
#endif
  munmap(stack_, size_);
#if !(defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT))
  delete static_cast<ucontext_t*>(context_);
#endif
}

void Fiber::start(void (*entry)()) {
  entry_ = entry;
  fake_stack_ = nullptr;
#ifdef VARSTATE_EMULATION_ASAN
  // A finished fiber left by a switch from the trampoline, whose frame (at
  // the top of the stack; every frame below it returned) keeps its
  // redzones: cleared here, cheaply, on every start (abandon() clears the
  // whole stack of a fiber that never finished).
  ASAN_UNPOISON_MEMORY_REGION(stack_ + size_ - page_size(), page_size());
#endif
#if defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT)
  // The stack as varstate_emulation_switch leaves it: six saved registers,
  // then the address it returns to (the trampoline), then a null return
  // address for the trampoline, which is entered with rsp = 8 (mod 16).
  auto top = reinterpret_cast<uintptr_t>(stack_ + size_) & ~uintptr_t{15};
  auto* slots = reinterpret_cast<void**>(top);
  slots[-1] = nullptr;
  slots[-2] = reinterpret_cast<void*>(&Fiber::trampoline);
  for (int i = 3; i <= 8; ++i) slots[-i] = nullptr;
  sp_ = &slots[-8];
#else
  auto* uc = static_cast<ucontext_t*>(context_);
  getcontext(uc);
  uc->uc_stack.ss_sp = stack_ + page_size();
  uc->uc_stack.ss_size = size_ - page_size();
  uc->uc_link = nullptr;
  makecontext(uc, &Fiber::trampoline, 0);
#endif
}

void Fiber::abandon() {
#ifdef VARSTATE_EMULATION_ASAN
  ASAN_UNPOISON_MEMORY_REGION(stack_ + page_size(), size_ - page_size());
#endif
}

void Fiber::resume() {
  Scheduler& s = scheduler;
  s.running = this;
  void* fake = nullptr;
  start_switch(&fake, stack_ + page_size(), size_ - page_size());
#if defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT)
  varstate_emulation_switch(&s.sp, sp_);
#else
  swapcontext(&s.context, static_cast<ucontext_t*>(context_));
#endif
  finish_switch(fake, nullptr, nullptr);
  s.running = nullptr;
}

void Fiber::yield() {
  Scheduler& s = scheduler;
  start_switch(&fake_stack_, s.stack_bottom, s.stack_size);
#if defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT)
  varstate_emulation_switch(&sp_, s.sp);
#else
  swapcontext(static_cast<ucontext_t*>(context_), &s.context);
#endif
  finish_switch(fake_stack_, &scheduler.stack_bottom, &scheduler.stack_size);
}

void Fiber::trampoline() {
  finish_switch(nullptr, &scheduler.stack_bottom, &scheduler.stack_size);
  Fiber* self = scheduler.running;
  self->entry_();
  // Done: back to the scheduler for good (this stack's frames are dropped).
  Scheduler& s = scheduler;
  start_switch(nullptr, s.stack_bottom, s.stack_size);
#if defined(__x86_64__) && !defined(VARSTATE_EMULATION_UCONTEXT)
  void* unused = nullptr;
  varstate_emulation_switch(&unused, s.sp);
#else
  setcontext(&s.context);
#endif
  std::abort();  // never resumed
}

}  // namespace varstate::cuda_emulation
