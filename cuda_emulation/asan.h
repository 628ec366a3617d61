// VARSTATE_EMULATION_ASAN: defined when AddressSanitizer instruments this
// build (GCC's __SANITIZE_ADDRESS__ or clang's feature test), for the parts
// of the emulation that tell it about fibers and poisoned device memory.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define VARSTATE_EMULATION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VARSTATE_EMULATION_ASAN 1
#endif
#endif
