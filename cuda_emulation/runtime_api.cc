// The CUDA runtime API functions varstate calls, on emulated GPUs
// (cuda_emulation/emulator_internal.h). Each checks its arguments as the
// runtime does, returns the same error codes, and records failures for
// cudaGetLastError(). Declared by the toolkit's cuda_runtime_api.h; this
// library takes libcudart's place in the emulated build.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda_emulation/device_work.h"
#include "cuda_emulation/emulator_internal.h"

namespace emu = varstate::cuda_emulation;

namespace {

cudaError_t fail(cudaError_t e) { return emu::set_last_error(e); }

// The current device, or an error: no device, or its sticky fault.
cudaError_t usable_device(int* device) {
  *device = emu::current_device();
  if (!emu::valid_device(*device)) return fail(cudaErrorNoDevice);
  return emu::sticky_error(*device);
}

emu::Stream* stream_or_null(cudaStream_t handle) { return emu::find_stream(handle); }

enum class Side {
  kHost,
  kPinned,
  kDevice
};

Side side_of(const void* p, size_t bytes) {
  if (emu::is_device_range(p, bytes)) return Side::kDevice;
  if (emu::is_pinned_range(p, bytes)) return Side::kPinned;
  return Side::kHost;
}

// Checks a copy's pointers against its kind; cudaMemcpyDefault infers it.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                       Side* dst_side, Side* src_side) {
  *dst_side = side_of(dst, bytes);
  *src_side = side_of(src, bytes);
  const bool dst_dev = *dst_side == Side::kDevice, src_dev = *src_side == Side::kDevice;
  // A pointer into device memory whose range runs past its allocation.
  if ((!dst_dev && emu::device_of(dst) >= 0) || (!src_dev && emu::device_of(src) >= 0)) {
    return cudaErrorInvalidValue;
  }
  switch (kind) {
    case cudaMemcpyHostToHost:
      return dst_dev || src_dev ? cudaErrorInvalidValue : cudaSuccess;
    case cudaMemcpyHostToDevice:
      return dst_dev && !src_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost:
      return src_dev && !dst_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice:
      return dst_dev && src_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDefault:
      return cudaSuccess;
  }
  return cudaErrorInvalidMemcpyDirection;
}

// Enqueues a copy on `s`. Pageable host memory behaves as the runtime
// documents: a host-to-device copy has read its source when the call
// returns (staged), a device-to-host copy has completed.
cudaError_t copy_on(emu::Stream* s, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  Side dst_side, src_side;
  if (const cudaError_t e = check_copy(dst, src, bytes, kind, &dst_side, &src_side);
      e != cudaSuccess) {
    return fail(e);
  }
  if (const cudaError_t e = emu::sticky_error(s->device()); e != cudaSuccess) return e;
  const bool to_device = dst_side == Side::kDevice, from_device = src_side == Side::kDevice;
  if (to_device && from_device) {
    emu::count(&emu::Stats::d2d), emu::count(&emu::Stats::d2d_bytes, bytes);
  } else if (to_device) {
    emu::count(&emu::Stats::h2d), emu::count(&emu::Stats::h2d_bytes, bytes);
    if (src_side == Side::kHost) emu::count(&emu::Stats::h2d_pageable);
  } else if (from_device) {
    emu::count(&emu::Stats::d2h), emu::count(&emu::Stats::d2h_bytes, bytes);
  }
  if (src_side == Side::kHost && dst_side == Side::kDevice) {
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    emu::enqueue_ordered(
        s,
        emu::Task{[dst, staged] { std::memcpy(dst, staged->data(), staged->size()); }, {}, true});
    return cudaSuccess;
  }
  const emu::StreamPoint p =
      emu::enqueue_ordered(s, emu::Task{[=] { std::memcpy(dst, src, bytes); }, {}, true});
  if (dst_side == Side::kHost && src_side == Side::kDevice) {
    emu::count(&emu::Stats::host_waits);
    s->wait(p.seq);
  }
  return cudaSuccess;
}

cudaError_t set_on(emu::Stream* s, void* p, int value, size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!emu::is_device_range(p, bytes)) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = emu::sticky_error(s->device()); e != cudaSuccess) return e;
  emu::count(&emu::Stats::memsets);
  emu::enqueue_ordered(s, emu::Task{[=] { std::memset(p, value, bytes); }, {}, true});
  return cudaSuccess;
}

struct MemPool {
  int device;
};

}  // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int* count) {
  *count = emu::config().devices;
  return *count == 0 ? fail(cudaErrorNoDevice) : cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = emu::current_device();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!emu::valid_device(device)) return fail(cudaErrorInvalidDevice);
  emu::set_current_device(device);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!emu::valid_device(device)) return fail(cudaErrorInvalidDevice);
  std::memset(prop, 0, sizeof *prop);
  const int arch = emu::config().arch;
  std::snprintf(prop->name, sizeof prop->name, "varstate emulated GPU (sm_%d, on the CPU)",
                arch / 10);
  prop->totalGlobalMem = emu::config().memory;
  prop->major = arch / 100;
  prop->minor = arch / 10 % 10;
  prop->multiProcessorCount = emu::config().multiprocessors;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7FFFFFFF;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->warpSize = 32;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->unifiedAddressing = 1;
  prop->concurrentKernels = 1;
  prop->asyncEngineCount = 2;
  prop->pciDeviceID = device;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!emu::valid_device(device)) return fail(cudaErrorInvalidDevice);
  const int arch = emu::config().arch;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = emu::config().multiprocessors;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
      *value = arch / 100;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor:
      *value = arch / 10 % 10;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    default:
      return fail(cudaErrorInvalidValue);
  }
}

cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  if (func == nullptr) return fail(cudaErrorInvalidDeviceFunction);
  std::memset(attr, 0, sizeof *attr);
  attr->ptxVersion = emu::config().arch / 10;
  attr->binaryVersion = emu::config().arch / 10;
  attr->maxThreadsPerBlock = 1024;
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!emu::valid_device(device) || !emu::valid_device(peer)) return fail(cudaErrorInvalidDevice);
  *can = device != peer ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  static std::mutex mu;
  static std::set<std::pair<int, int>> enabled;
  const int device = emu::current_device();
  if (!emu::valid_device(peer) || peer == device || flags != 0) return fail(cudaErrorInvalidValue);
  std::lock_guard lock(mu);
  if (!enabled.insert({device, peer}).second) return fail(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  int device;
  if (const cudaError_t e = usable_device(&device); e != cudaSuccess) return e;
  emu::count(&emu::Stats::host_waits);
  emu::synchronize_device(device);
  return emu::sticky_error(device);
}

cudaError_t cudaGetLastError() { return emu::take_last_error(); }
cudaError_t cudaPeekAtLastError() { return emu::peek_last_error(); }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define VARSTATE_ERROR_NAME(E) \
  case E:                      \
    return #E;
    VARSTATE_ERROR_NAME(cudaSuccess)
    VARSTATE_ERROR_NAME(cudaErrorInvalidValue)
    VARSTATE_ERROR_NAME(cudaErrorMemoryAllocation)
    VARSTATE_ERROR_NAME(cudaErrorInvalidConfiguration)
    VARSTATE_ERROR_NAME(cudaErrorInvalidDevice)
    VARSTATE_ERROR_NAME(cudaErrorInvalidDeviceFunction)
    VARSTATE_ERROR_NAME(cudaErrorInvalidMemcpyDirection)
    VARSTATE_ERROR_NAME(cudaErrorInvalidResourceHandle)
    VARSTATE_ERROR_NAME(cudaErrorNotReady)
    VARSTATE_ERROR_NAME(cudaErrorNoDevice)
    VARSTATE_ERROR_NAME(cudaErrorPeerAccessAlreadyEnabled)
    VARSTATE_ERROR_NAME(cudaErrorIllegalAddress)
    VARSTATE_ERROR_NAME(cudaErrorLaunchFailure)
    VARSTATE_ERROR_NAME(cudaErrorMisalignedAddress)
#undef VARSTATE_ERROR_NAME
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidDeviceFunction:
      return "invalid device function";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected (emulated GPUs: VARSTATE_EMULATED_GPUS=0)";
    case cudaErrorPeerAccessAlreadyEnabled:
      return "peer access is already enabled";
    case cudaErrorIllegalAddress:
      return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    default:
      return cudaGetErrorName(error);
  }
}

// ---- Memory ----------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  int device;
  *ptr = nullptr;
  if (const cudaError_t e = usable_device(&device); e != cudaSuccess) return e;
  if (bytes == 0) return cudaSuccess;
  emu::count(&emu::Stats::allocations);
  *ptr = emu::allocate_device(device, bytes);
  return *ptr == nullptr ? fail(cudaErrorMemoryAllocation) : cudaSuccess;
}

cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t stream) {
  if (stream_or_null(stream) == nullptr) return fail(cudaErrorInvalidResourceHandle);
  return cudaMalloc(ptr, bytes);
}

cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  const int owner = emu::device_of(ptr);
  if (owner < 0 || !emu::begin_free(ptr)) return fail(cudaErrorInvalidValue);
  emu::count(&emu::Stats::frees), emu::count(&emu::Stats::host_waits);
  emu::synchronize_device(owner);  // cudaFree waits for the device, as on a GPU
  emu::finish_free(ptr);
  return cudaSuccess;
}

cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  emu::Stream* s = stream_or_null(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (ptr == nullptr) return cudaSuccess;
  if (!emu::begin_free(ptr)) return fail(cudaErrorInvalidValue);
  emu::count(&emu::Stats::frees);
  emu::enqueue_ordered(s, emu::Task{[ptr] { emu::finish_free(ptr); }, {}, false});
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int flags) {
  *ptr = emu::allocate_pinned(bytes);
  return *ptr == nullptr ? fail(cudaErrorMemoryAllocation) : cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) { return cudaHostAlloc(ptr, bytes, 0); }

cudaError_t cudaFreeHost(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  return emu::free_pinned(ptr) ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  std::memset(attr, 0, sizeof *attr);
  const int device = emu::device_of(ptr);
  if (device >= 0) {
    attr->type = cudaMemoryTypeDevice;
    attr->device = device;
    attr->devicePointer = const_cast<void*>(ptr);
  } else if (emu::is_pinned_range(ptr, 0)) {
    attr->type = cudaMemoryTypeHost;
    attr->device = emu::current_device();
    attr->hostPointer = const_cast<void*>(ptr);
    attr->devicePointer = const_cast<void*>(ptr);
  } else {
    attr->type = cudaMemoryTypeUnregistered;
    attr->device = -2;
  }
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  int device;
  if (const cudaError_t e = usable_device(&device); e != cudaSuccess) return e;
  *total = emu::config().memory;
  *free = *total - emu::device_memory_used(device);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* pool, int device) {
  static MemPool pools[16];
  if (!emu::valid_device(device)) return fail(cudaErrorInvalidDevice);
  pools[device].device = device;
  *pool = reinterpret_cast<cudaMemPool_t>(&pools[device]);
  return cudaSuccess;
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void* value) {
  // Emulated memory is unmapped when freed; pool thresholds change nothing.
  return pool == nullptr || value == nullptr ? fail(cudaErrorInvalidValue) : cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  int device;
  if (const cudaError_t e = usable_device(&device); e != cudaSuccess) return e;
  emu::Stream* s = emu::find_stream(nullptr);
  if (const cudaError_t e = copy_on(s, dst, src, bytes, kind); e != cudaSuccess) return e;
  emu::count(&emu::Stats::host_waits);
  s->wait(s->last().seq);
  return emu::sticky_error(device);
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  emu::Stream* s = stream_or_null(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  return copy_on(s, dst, src, bytes, kind);
}

cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                                size_t bytes, cudaStream_t stream) {
  emu::Stream* s = stream_or_null(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!emu::is_device_range(dst, bytes) || !emu::is_device_range(src, bytes) ||
      emu::device_of(dst) != dst_device || emu::device_of(src) != src_device) {
    return fail(cudaErrorInvalidValue);
  }
  return copy_on(s, dst, src, bytes, cudaMemcpyDeviceToDevice);
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  int device;
  if (const cudaError_t e = usable_device(&device); e != cudaSuccess) return e;
  emu::Stream* s = emu::find_stream(nullptr);
  if (const cudaError_t e = set_on(s, ptr, value, bytes); e != cudaSuccess) return e;
  emu::count(&emu::Stats::host_waits);
  s->wait(s->last().seq);
  return emu::sticky_error(device);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  emu::Stream* s = stream_or_null(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  return set_on(s, ptr, value, bytes);
}

// ---- Streams and events ---------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  int device;
  if (const cudaError_t e = usable_device(&device); e != cudaSuccess) return e;
  *stream = emu::create_stream(device, flags);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return emu::destroy_stream(stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  emu::Stream* s = stream_or_null(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  emu::count(&emu::Stats::host_waits);
  s->wait(s->last().seq);
  return emu::sticky_error(s->device());
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  emu::Stream* s = stream_or_null(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t e = emu::sticky_error(s->device()); e != cudaSuccess) return e;
  return s->done(s->last().seq) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  emu::Stream* s = stream_or_null(stream);
  auto* e = reinterpret_cast<emu::Event*>(event);
  if (s == nullptr || e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (e->point.seq == 0) return cudaSuccess;  // nothing recorded: nothing to wait for
  emu::enqueue_ordered(s, emu::Task{[] {}, {e->point}, false});
  return cudaSuccess;
}

// A host function runs in stream order on the stream's worker, as a GPU's
// host callback does; it is host work, so device memory stays closed to it.
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  emu::Stream* s = stream_or_null(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (fn == nullptr) return fail(cudaErrorInvalidValue);
  if (const cudaError_t e = emu::sticky_error(s->device()); e != cudaSuccess) return e;
  emu::enqueue_ordered(s, emu::Task{[fn, user_data] { fn(user_data); }, {}, false});
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  int device;
  if (const cudaError_t e = usable_device(&device); e != cudaSuccess) return e;
  *event = reinterpret_cast<cudaEvent_t>(new emu::Event{device, {}});
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<emu::Event*>(event);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  emu::Stream* s = stream_or_null(stream);
  auto* e = reinterpret_cast<emu::Event*>(event);
  if (s == nullptr || e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (s->device() != e->device) return fail(cudaErrorInvalidResourceHandle);
  // The event completes when the stream's work so far has (the legacy
  // default stream's included: a marker task carries its waits).
  e->point = emu::enqueue_ordered(s, emu::Task{[] {}, {}, false});
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  auto* e = reinterpret_cast<emu::Event*>(event);
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (e->point.seq > 0 && !e->point.stream->done(e->point.seq)) {
    emu::count(&emu::Stats::host_waits);  // a finished event does not stall the host
  }
  if (e->point.seq > 0) e->point.stream->wait(e->point.seq);
  return emu::sticky_error(e->device);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  auto* e = reinterpret_cast<emu::Event*>(event);
  if (e == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (const cudaError_t err = emu::sticky_error(e->device); err != cudaSuccess) return err;
  if (e->point.seq == 0 || e->point.stream->done(e->point.seq)) return cudaSuccess;
  return cudaErrorNotReady;
}

}  // extern "C"
