#!/usr/bin/env python3
"""PyTorch (and cuRAND through CuPy) random fills, for comparison with bench_random.

Fills 256 MiB and 1 GiB of float32 with uniform, normal and truncated normal
values, on the CPU (torch.set_num_threads(--threads), default 2) and, when
available, on the first CUDA GPU, and reports GB/s of bytes written next to the
same-run write bandwidth (torch's fill_). Rows:
  rand / randn          allocate + fill (compare with bench_random's *_op)
  uniform_ / normal_    in place       (compare with bench_random's *_fill)
  trunc_normal_         nn.init.trunc_normal_(t, std=1, a=-2, b=2), in place
  curand_*              cupy.cuda.curand Philox4_32_10 into a preallocated array
Usage: compare_torch_random.py [--threads N] [--reps N] [--out FILE.json]
"""
import argparse
import json
import os
import platform
import statistics
import time

import torch

MiB = 1 << 20
SIZES_MIB = (256, 1024)


def cpu_seconds(fn, reps):
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cuda_seconds(fn, reps):
    fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    return statistics.median(times)


def torch_cases(t, n, device):
    return {
        "fill_ (limit)": lambda: t.fill_(0.5),
        "rand": lambda: torch.rand(n, device=device),
        "uniform_": lambda: t.uniform_(),
        "randn": lambda: torch.randn(n, device=device),
        "normal_": lambda: t.normal_(),
        "trunc_normal_": lambda: torch.nn.init.trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0),
    }


def curand_cases(n):
    try:
        import cupy
        from cupy.cuda import curand
    except ImportError:
        return {}
    gen = curand.createGenerator(curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
    curand.setPseudoRandomGeneratorSeed(gen, 1234)
    buf = cupy.empty(n, dtype=cupy.float32)
    return {
        "curand_uniform": lambda: curand.generateUniform(gen, buf.data.ptr, n),
        "curand_normal": lambda: curand.generateNormal(gen, buf.data.ptr, n, 0.0, 1.0),
    }


def cupy_seconds(fn, reps):
    import cupy
    fn()
    cupy.cuda.Device().synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def run(device, reps):
    rows = []
    for mib in SIZES_MIB:
        nbytes = mib * MiB
        n = nbytes // 4
        t = torch.zeros(n, dtype=torch.float32, device=device)
        timer = cpu_seconds if device == "cpu" else cuda_seconds
        cases = [(name, fn, timer) for name, fn in torch_cases(t, n, device).items()]
        if device != "cpu":
            cases += [(name, fn, cupy_seconds) for name, fn in curand_cases(n).items()]
        limit = None
        for name, fn, time_fn in cases:
            s = time_fn(fn, reps)
            gbps = nbytes / s / 1e9
            if limit is None:
                limit = gbps
            rows.append({"device": device, "MiB": mib, "case": name, "seconds": s, "GBps": gbps,
                         "ratio_to_fill": gbps / limit})
            print(f"{device:5} {mib:5} MiB  {name:15} {s * 1e3:9.2f} ms  {gbps:8.2f} GB/s"
                  f"  {gbps / limit:5.2f} of fill_", flush=True)
        del t
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=0, help="default: 3 on the CPU, 20 on a GPU")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                      f"torch_random-{platform.node()}.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    rows = run("cpu", args.reps or 3)
    gpu = None
    if torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(0)
        rows += run("cuda", args.reps or 20)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"torch": torch.__version__, "threads": args.threads, "host": platform.node(),
                   "gpu": gpu, "results": rows}, f, indent=1)
    print("saved", args.out)


if __name__ == "__main__":
    main()
