"""The kill table: deliberate defects of the kinds real GPU runs find, each
a one-place change to a scratch copy of the tree, and the emulated-GPU test
that must fail because of it (test/gpu_defects/run_defects.py applies them).

Each entry: name, what kind of defect it is, the file, the exact text to
replace (it must occur exactly once), its replacement, the test binary and
its Catch filter, extra environment, and whether it needs AddressSanitizer
to be seen (an out-of-bounds read the CAS loop recovers from changes no
value; only a poisoned byte reveals it).
"""

DIRTY_READ_FIXED = """    kernels::cuda::take_marks(static_cast<uint8_t*>(device_bits_), moved.get(), rows_,
                              device.stream());
  }
  std::vector<uint8_t> host(n);
  copy_bytes(DeviceManager::instance().cpu(), host.data(), device, moved.get(), n);
  if (after_device_read_for_testing_) after_device_read_for_testing_();"""

# The pre-fix take: copy the marks, then clear them with a separate memset.
DIRTY_READ_RACY = """  }
  std::vector<uint8_t> host(n);
  copy_bytes(DeviceManager::instance().cpu(), host.data(), device, device_bits_, n);
  if (after_device_read_for_testing_) after_device_read_for_testing_();
  device.memset(device_bits_, 0, n);"""

DEFECTS = [
    dict(name="oob_read_in_cas_loop",
         kind="an out-of-bounds read in a CAS loop (the element after the one updated)",
         file="kernels/cuda/scatter_internal.cuh",
         old="W seen = load_once(w), want;",
         new="W seen = load_once(w + 1), want;",
         test="test_kernels_scatter_gpu",
         filter="gpu scatter on a table ending at an odd element boundary*",
         needs_asan=True),
    dict(name="wrong_complex_product",
         kind="a wrong complex product (a sign in the cross terms)",
         file="kernels/cuda/scatter_internal.cuh",
         old="cas_apply(p, [u](C t) { return scatter_combine<Op>(t, u); });",
         new=("cas_apply(p, [u](C t) { if constexpr (kIsComplex<C> && Op == ScatterOp::kMul) "
              "return C(t.real() * u.real() + t.imag() * u.imag(), "
              "t.real() * u.imag() + t.imag() * u.real()); "
              "return scatter_combine<Op>(t, u); });"),
         test="test_kernels_scatter_gpu",
         filter="gpu atomic scatter matches the cpu kernel - complex64"),
    dict(name="host_read_before_sync",
         kind=("a host read before the stream sync (a save writes a GPU tensor's staging "
               "buffer to the file before the copy into it has run)"),
         file="checkpoint/saver_io.cc",
         old="    ready[k % 2]->wait_host();\n",
         new="",
         test="test_checkpoint_gpu",
         filter="GPU variables save through small staging buffers and restore",
         env={"VARSTATE_EMULATED_GPU_SCHEDULE": "lazy"}),
    dict(name="free_while_queued",
         kind="a free of memory a queued kernel uses (freed on another stream)",
         file="device/cuda_device.cc",
         old="cudaError_t err = cudaFreeAsync(ptr, stream_);",
         new="cudaError_t err = cudaFreeAsync(ptr, nullptr);",
         test="test_runtime_gpu", filter="[dirty_rows]"),
    dict(name="missing_syncthreads",
         kind="a missing __syncthreads (int32 matmul: a tile read before all of it is written)",
         file="kernels/cuda/matmul.cu",
         old="    __syncthreads();\n#pragma unroll",
         new="#pragma unroll",
         test="test_runtime_gpu", filter="GPU matmul equals the CPU's"),
    dict(name="index_overflow_past_2_31",
         kind="an index overflow past 2^31 elements (a row offset in 32 bits)",
         file="kernels/cuda/scatter_internal.cuh",
         old="C* dst = table + static_cast<int64_t>(indices[i]) * row_width;",
         new="C* dst = table + static_cast<int>(static_cast<int64_t>(indices[i]) * row_width);",
         test="test_kernels_scatter_gpu",
         filter="gpu int8 scatter_add into a table of 2^31 + 3 elements"),
    dict(name="wrong_grid_size",
         kind="a wrong grid size (int32 matmul: the row tiles rounded down, not up)",
         file="kernels/cuda/matmul.cu",
         old="static_cast<unsigned>((m + kTile - 1) / kTile));",
         new="static_cast<unsigned>(m / kTile));",
         test="test_runtime_gpu", filter="GPU matmul equals the CPU's"),
    dict(name="host_deref_of_device_pointer",
         kind="a host dereference of a device pointer (the dirty marks read in place)",
         file="runtime/dirty_rows.cc",
         old="    if (host[static_cast<size_t>(r)] != 0) set_bit(r);",
         new="    if (static_cast<const uint8_t*>(device_bits_)[r] != 0) set_bit(r);",
         test="test_runtime_gpu", filter="[dirty_rows]"),
    dict(name="missing_event_wait_across_streams",
         kind="a missing event wait across streams (a peer copy's destination not made to wait)",
         file="device/cuda_device.cc",
         old="      dst_device.wait_event(*src_device.record_event());\n",
         new="",
         test="test_device_multi_gpu", filter="",
         env={"VARSTATE_EMULATED_GPU_SCHEDULE": "lazy"}),
    dict(name="wrong_radix_sort_bit_range",
         kind="a wrong radix-sort bit range (the top bit of the row index left out)",
         file="kernels/cuda/scatter.cu",
         old="  while (bits < 64 && (uint64_t{1} << bits) < static_cast<uint64_t>(rows)) ++bits;\n  return bits;",
         new="  while (bits < 64 && (uint64_t{1} << bits) < static_cast<uint64_t>(rows)) ++bits;\n  return bits > 1 ? bits - 1 : bits;",
         test="test_kernels_scatter_gpu",
         filter="gpu deterministic scatter is reproducible and equals the cpu kernel - float"),
    dict(name="dirty_mark_lost",
         kind="a dirty mark lost (the take's copy and clear as two stream operations: the race fixed in 2026-11)",
         file="runtime/dirty_rows.cc",
         old=DIRTY_READ_FIXED,
         new=DIRTY_READ_RACY,
         test="test_runtime_gpu",
         filter="dirty rows: a marking kernel enqueued during a take is not lost"),
    dict(name="misrouted_partition_row",
         kind="a misrouted partition row (a part given every update row, not its own)",
         file="runtime/partitioned_variable.cc",
         old="} else if (static_cast<int64_t>(positions.size()) == n) {",
         new="} else if (2 * static_cast<int64_t>(positions.size()) >= n) {",
         test="test_runtime", filter="[partitioned]",
         env={"VARSTATE_TEST_DEVICE": "/device:GPU:0"}),
]
