#!/usr/bin/env python3
"""PyTorch's scatter ops on the configurations of bench_scatter, side by side.

Measures, on the same [N, D] table shapes, index distributions and byte
formula as bench/scatter_bench.cc:
  scatter_update -> Tensor.index_copy_
  scatter_add    -> Tensor.index_add_
  scatter_mul    -> Tensor.index_reduce_(reduce="prod") (scatter_reduce_ when
                    index_reduce_ is missing)
and the copy bandwidth of the same run (Tensor.copy_ of M*D elements). On the
CPU with torch.set_num_threads(THREADS); on CUDA when available, once with the
default algorithms and once under torch.use_deterministic_algorithms(True).

Each result is keyed by the bench_scatter benchmark name it corresponds to.
Writes JSON (--out). With --ours-bin BENCH_SCATTER the matching bench_scatter
benchmark runs right before each torch measurement (so that both see the
same machine load) and ours / torch is printed and stored; with --ours
BENCH_JSON results of an earlier bench_scatter run are joined instead.
Uses Debian's python3-torch (/usr/bin/python3) on the CPU machine.

  /usr/bin/python3 bench/compare_torch_scatter.py --device cpu --threads 2 \
      --ours-bin build/bench/bench_scatter --out bench/results/scatter-vs-torch-cpu.json
"""
import argparse
import json
import math
import os
import platform
import subprocess
import statistics
import sys
import time

import numpy as np
import torch

ZIPF_S = 1.05


def draw_indices(dist, rows, m, seed):
    rng = np.random.default_rng(seed)
    if dist == "onerow":
        return np.zeros(m, dtype=np.int64)
    if dist == "uniform":
        return rng.integers(0, rows, size=m, dtype=np.int64)
    ranks = np.arange(1, rows + 1, dtype=np.float64)
    cdf = np.cumsum(ranks ** -ZIPF_S)
    cdf /= cdf[-1]
    rank = np.minimum(np.searchsorted(cdf, rng.random(m)), rows - 1).astype(np.uint64)
    # The same scattering of ranks over the table as the C++ benchmark.
    return ((rank * np.uint64(2654435761)) % np.uint64(rows)).astype(np.int64)


def make_updates(op, m, width, dtype, device, seed):
    g = torch.Generator().manual_seed(seed)
    if op == "mul":
        u = torch.where(torch.rand(m, width, generator=g) < 0.5,
                        torch.tensor(1 + 1 / 1024), torch.tensor(1 - 1 / 1024))
    else:
        u = torch.rand(m, width, generator=g) * 2 - 1
    return u.to(dtype).to(device)


def configs(full, device):
    is_gpu = device == "cuda"
    out = []
    big = full or is_gpu
    for width in (64, 256):
        if width == 256 and not big:
            continue
        for m in (65536, 1048576):
            for dist in ("uniform", "zipf1.05"):
                for op in ("update", "add", "mul"):
                    out.append(dict(op=op, rows=1000000, width=width, m=m, dist=dist,
                                    index="i64", dtype="f32"))
    for width in (1, 4, 32, 128, 512):
        rows = 1000000 if big else min(1000000, (64 << 20) // width)
        for index in ("i32", "i64"):
            out.append(dict(op="add", rows=rows, width=width, m=65536, dist="uniform",
                            index=index, dtype="f32"))
    for op in ("add", "mul"):
        out.append(dict(op=op, rows=1000000, width=64, m=65536, dist="uniform", index="i64",
                        dtype="bf16"))
        if device == "cpu":
            out.append(dict(op=op, rows=1000000, width=64, m=65536, dist="uniform", index="i64",
                            dtype="f16"))
        out.append(dict(op=op, rows=1000000, width=64, m=65536, dist="onerow", index="i64",
                        dtype="f32"))
    return out


def bench_name(c, device, deterministic):
    path = ("deterministic" if deterministic else "atomic") if device == "cuda" else "serial-order"
    dist = c["dist"]
    return (f"scatter/{'gpu' if device == 'cuda' else 'cpu'}/{c['op']}/{path}/"
            f"N{c['rows']}xD{c['width']}/M{c['m']}/{dist}/{c['index']}/{c['dtype']}")


def timer(device):
    if device == "cuda":
        def run(fn, reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3 / reps
    else:
        def run(fn, reps):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            return (time.perf_counter() - t0) / reps
    return run


def measure(fn, device, moved, rounds, reps=None):
    run = timer(device)
    if reps is None:
        reps = 2 if moved >= 256e6 else 5 if moved >= 32e6 else (50 if device == "cuda" else 10)
    fn()  # warm-up
    times = [run(fn, reps) for _ in range(rounds)]
    return statistics.median(times)


def run_config(c, device, deterministic, rounds):
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[c["dtype"]]
    itype = torch.int64 if c["index"] == "i64" else torch.int32
    rows, width, m = c["rows"], c["width"], c["m"]
    table = torch.full((rows, width), 1.0 if c["op"] == "mul" else 0.0, dtype=dtype, device=device)
    sets = []
    for k in range(4):  # fresh indices for consecutive calls, as bench_scatter
        idx = torch.from_numpy(draw_indices(c["dist"], rows, m, 7 + k)).to(itype).to(device)
        sets.append((idx, make_updates(c["op"], m, width, dtype, device, 11 + k)))
    call = [0]
    has_index_reduce = hasattr(torch.Tensor, "index_reduce_")

    def step():
        idx, upd = sets[call[0] % len(sets)]
        call[0] += 1
        if c["op"] == "add":
            table.index_add_(0, idx, upd)
        elif c["op"] == "update":
            table.index_copy_(0, idx if idx.dtype == torch.int64 else idx.long(), upd)
        elif has_index_reduce:
            table.index_reduce_(0, idx if idx.dtype == torch.int64 else idx.long(), upd, "prod")
        else:
            expanded = (idx if idx.dtype == torch.int64 else idx.long()).unsqueeze(1).expand(m, width)
            table.scatter_reduce_(0, expanded, upd, reduce="prod")

    elem = torch.tensor([], dtype=dtype).element_size()
    moved = 3.0 * m * width * elem + m * (8 if c["index"] == "i64" else 4)
    src = torch.ones(m * width, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    copy_reps = max(2, min(1000, int(2e9 / (8.0 * src.numel()))))  # >= ~0.1 s per round
    copy_s = measure(lambda: dst.copy_(src), device, 2.0 * src.numel() * 4, rounds, copy_reps)
    copy_gbps = 2.0 * src.numel() * 4 / copy_s / 1e9
    op_name = {"add": "index_add_", "update": "index_copy_",
               "mul": "index_reduce_(prod)" if has_index_reduce else "scatter_reduce_(prod)"}[c["op"]]
    try:
        torch.use_deterministic_algorithms(deterministic)
        s = measure(step, device, moved, rounds)
        error = None
    except RuntimeError as e:  # no deterministic implementation
        s, error = float("nan"), str(e).splitlines()[0]
    finally:
        torch.use_deterministic_algorithms(False)
    gbps = moved / s / 1e9 if s == s else float("nan")
    return {"name": bench_name(c, device, deterministic), "torch_op": op_name,
            "seconds": s, "GBps": gbps, "Mupdates_per_s": m / s / 1e6 if s == s else float("nan"),
            "copy_GBps": copy_gbps, "ratio": gbps / copy_gbps, "error": error, **c}


def load_ours(path):
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data.get("benchmarks", []):
        name = b["name"].split("/iterations:")[0].split("/manual_time")[0]
        if "GBps" in b:
            out[name] = b
    return out


def run_ours(binary, name):
    """GBps of one bench_scatter benchmark, run now."""
    pattern = "^" + name.replace(".", "[.]") + "/iterations"
    out = subprocess.run([binary, f"--benchmark_filter={pattern}", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True).stdout
    runs = [b for b in json.loads(out)["benchmarks"] if "GBps" in b]
    return runs[0] if runs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads on the CPU")
    ap.add_argument("--full", action="store_true", help="the whole set on the CPU too")
    ap.add_argument("--filter", default="", help="only configurations whose name contains this")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds; the median is kept")
    ap.add_argument("--out", default="", help="JSON output path")
    ap.add_argument("--ours", default="", help="bench_scatter JSON to compare with")
    ap.add_argument("--ours-bin", default="", help="bench_scatter binary to run side by side")
    args = ap.parse_args()

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(args.threads)
    results = []
    for c in configs(args.full, device):
        for det in ((False, True) if device == "cuda" else (False,)):
            name = bench_name(c, device, det)
            if args.filter not in name:
                continue
            ours = run_ours(args.ours_bin, name) if args.ours_bin else None
            r = run_config(c, device, det, args.rounds)
            if ours is not None:
                r["ours_GBps"] = ours["GBps"]
                r["ours_ratio"] = ours["ratio"]
                r["ours_over_torch"] = ours["GBps"] / r["GBps"]
            results.append(r)
            print(f"{name:75s} {r['torch_op']:22s} {r['GBps']:8.2f} GB/s  "
                  f"{r['Mupdates_per_s']:9.2f} Mupd/s  ratio {r['ratio']:.3f}"
                  + (f"  ours {ours['GBps']:8.2f} GB/s  ours/torch {r['ours_over_torch']:.2f}"
                     if ours is not None else "")
                  + (f"  ({r['error']})" if r["error"] else ""), flush=True)
    meta = {"torch": torch.__version__, "device": device,
            "device_name": torch.cuda.get_device_name(0) if device == "cuda" else platform.processor(),
            "threads": torch.get_num_threads(), "host": platform.node(), "zipf_s": ZIPF_S}
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump({"context": meta, "results": results}, f, indent=1)
    if args.ours:
        ours = load_ours(args.ours)
        print(f"\n{'configuration':75s} {'ours GB/s':>10s} {'torch GB/s':>10s} {'ours/torch':>10s}")
        for r in results:
            b = ours.get(r["name"])
            if b is None or not (r["GBps"] == r["GBps"]):
                continue
            print(f"{r['name']:75s} {b['GBps']:10.2f} {r['GBps']:10.2f} {b['GBps'] / r['GBps']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
