#!/usr/bin/env python3
"""Element-wise math and casts against PyTorch's or TensorFlow's, interleaved.

Each case of bench_math_ops's dtype cases (bench/math_ops_bench.cc):

  elementwise/OP/DTYPE  c = OP(a, b) for OP in add, multiply, divide,
                        maximum, on two tensors of 64M elements (16M with
                        --quick), DTYPE float32, bfloat16 or float16;
  cast/FROM/TO          c = a cast to TO, between float32 and each of
                        bfloat16, float16 and float64, both ways;
  assign_add/DTYPE      a += b in place (Tensor.add_, a TensorFlow
                        variable's assign_add);
  floor_division/OP/DTYPE/DIVISOR
                        floordiv or floormod (torch.div(rounding_mode=
                        "floor") / torch.remainder, tf.math.floordiv /
                        floormod) of int32, int64 or float32 (floordiv)
                        values of both signs by the scalar 1,000,003 or by
                        a tensor of divisors of both signs;
  matmul/DTYPE/N        c = a @ b of two N x N matrices (N 256, 1024, 2048;
                        up to 1024 with --quick), DTYPE float32, float64,
                        bfloat16 or float16 (torch.matmul, tf.linalg.matmul);
                        its limit: the pool's fused multiply-adds (GFLOP/s);

runs against the peer's op on tensors of the same size and values:
torch.add/mul/div/maximum and Tensor.to (--peer torch), or TensorFlow
2.x's eager tf.math ops and tf.cast (--peer tf, eager execution: the op is
one kernel on a tensor TensorFlow already holds). A case's round runs
bench_math_ops filtered to it (5 calls, mean; its limit: a copy of the
same bytes, half read and half written), then 1 untimed and 5 timed peer
calls (median); --rounds rounds alternate so that the machine's load hits
both alike. Every call allocates its result, in both libraries. Figures
are medians over rounds. Threads: VARSTATE_CPU_THREADS, torch's
set_num_threads or TensorFlow's intra/inter-op threads, all --threads.

Writes bench/results/math-ops-vs-PEER-MACHINE.json (--out to change).

  ~/.cache/varstate/venv-torch/bin/python bench/compare_math_ops.py --peer torch \\
      --ours-bin build/bench/bench_math_ops [--only cast/float32/bfloat16,...] [--quick]
  ~/.cache/varstate/venv-tf2.21/bin/python bench/compare_math_ops.py --peer tf ...
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

OPS = ("add", "multiply", "divide", "maximum")
DTYPES = ("float32", "bfloat16", "float16")
CASTS = (("float32", "bfloat16"), ("bfloat16", "float32"), ("float32", "float16"),
         ("float16", "float32"), ("float32", "float64"), ("float64", "float32"))


MATMUL_DTYPES = ("float32", "float64", "bfloat16", "float16")


def matmul_sizes(quick):
    return (256, 1024) if quick else (256, 1024, 2048)


def cases(quick=False):
    out = [f"elementwise/{op}/{d}" for op in OPS for d in DTYPES]
    out += [f"assign_add/{d}" for d in DTYPES]
    out += [f"cast/{a}/{b}" for a, b in CASTS]
    out += [f"floor_division/{op}/{d}/{by}" for op in ("floordiv", "floormod")
            for d in ("int32", "int64", "float32") for by in ("scalar", "tensor")
            if d != "float32" or (op == "floordiv" and by == "tensor")]
    return out + [f"matmul/{d}/{n}" for d in MATMUL_DTYPES for n in matmul_sizes(quick)]


def operand_values(n, offset):
    """bench_math_ops's operand: values in [0.5, 2) as float32."""
    i = np.arange(n, dtype=np.int64)
    return (0.5 + ((i * 7919) % 1499).astype(np.float32) / np.float32(1000) +
            np.float32(offset)).astype(np.float32)


def division_values(n, dtype, divisor):
    """bench_math_ops's division_operand: dividends from the top bits of
    i * 2^64 / golden ratio, divisors ((i * 7919) % 1999) - 999 (0 -> 1000)."""
    i = np.arange(n, dtype=np.uint64)
    if divisor:
        d = (i.astype(np.int64) * 7919) % 1999 - 999
        d[d == 0] = 1000
        return d.astype({"int64": np.int64, "int32": np.int32, "float32": np.float32}[dtype])
    with np.errstate(over="ignore"):
        h = i * np.uint64(0x9E3779B97F4A7C15)
    if dtype == "int64":
        return h.view(np.int64)
    top = (h >> np.uint64(32)).astype(np.uint32).view(np.int32)
    return top if dtype == "int32" else (top.astype(np.float32) / np.float32(65536))


class Torch:
    def __init__(self, threads):
        import torch
        self.torch = torch
        torch.set_num_threads(threads)
        self.version = "torch " + torch.__version__

    def tensor(self, values, dtype):
        return self.torch.from_numpy(values).to(getattr(self.torch, dtype))

    def call(self, case, a, b):
        t = self.torch
        kind, x, y = (case + "/").split("/")[:3]
        if kind == "assign_add":
            return lambda: a.add_(b)
        if kind == "cast":
            to = getattr(t, y)
            return lambda: a.to(to)
        if kind == "matmul":
            return lambda: t.matmul(a, b)
        if kind == "floor_division":
            if x == "floordiv":
                return lambda: t.div(a, b, rounding_mode="floor")
            return lambda: t.remainder(a, b)
        fn = {"add": t.add, "multiply": t.mul, "divide": t.div, "maximum": t.maximum}[x]
        return lambda: fn(a, b)


class TensorFlow:
    def __init__(self, threads):
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        self.tf = tf
        self.version = "tensorflow " + tf.__version__

    def tensor(self, values, dtype):
        with self.tf.device("/CPU:0"):
            return self.tf.cast(self.tf.constant(values), getattr(self.tf, dtype))

    def call(self, case, a, b):
        tf = self.tf
        kind, x, y = (case + "/").split("/")[:3]
        if kind == "assign_add":
            with tf.device("/CPU:0"):
                var = tf.Variable(a)
            return lambda: var.assign_add(b, read_value=False)
        if kind == "cast":
            to = getattr(tf, y)
            return lambda: tf.cast(a, to)
        if kind == "matmul":
            return lambda: tf.linalg.matmul(a, b)
        if kind == "floor_division":
            return lambda: {"floordiv": tf.math.floordiv, "floormod": tf.math.floormod}[x](a, b)
        fn = {"add": tf.math.add, "multiply": tf.math.multiply, "divide": tf.math.divide,
              "maximum": tf.math.maximum}[x]
        return lambda: fn(a, b)


def peer_ms(peer, case, n):
    kind, x, y = (case + "/").split("/")[:3]
    dtype = {"cast": x, "assign_add": x, "matmul": x}.get(kind, y)
    if kind == "floor_division":
        by_scalar = case.endswith("/scalar")
        a = peer.tensor(division_values(n, dtype, False), dtype)
        b = (peer.tensor(np.array(1000003, dtype=np.int64), dtype) if by_scalar
             else peer.tensor(division_values(n, dtype, True), dtype))
        call = peer.call(case, a, b)
        result = call()  # untimed
        times = []
        for _ in range(5):
            del result
            t0 = time.perf_counter()
            result = call()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3
    if kind == "matmul":  # normal values, as bench_math_ops's
        rng = np.random.default_rng(1)
        size = int(y)
        a = peer.tensor(rng.standard_normal((size, size), dtype=np.float32), dtype)
        b = peer.tensor(rng.standard_normal((size, size), dtype=np.float32), dtype)
    else:
        a = peer.tensor(operand_values(n, 0.0), dtype)
        b = None
    if kind == "elementwise":
        b = peer.tensor(operand_values(n, 0.25), dtype)
    elif kind == "assign_add":
        b = peer.tensor(operand_values(n, 0.0), dtype)
    call = peer.call(case, a, b)
    result = call()  # untimed
    times = []
    for _ in range(7 if kind == "matmul" and int(y) <= 256 else 5):
        del result
        t0 = time.perf_counter()
        result = call()  # both run CPU kernels synchronously: done on return
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def ours(bin_path, case, quick, threads):
    """(ms, limit_ms, bytes or flops) of bench_math_ops's BM_cpu_CASE."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        env = dict(os.environ, VARSTATE_CPU_THREADS=str(threads),
                   VARSTATE_BENCH_QUICK="1" if quick else "0")
        subprocess.run([bin_path, f"--benchmark_filter=^BM_cpu_{case}/iterations",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"],
                       check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            runs = json.load(f)["benchmarks"]
    if len(runs) != 1:
        sys.exit(f"compare_math_ops: {len(runs)} results for BM_cpu_{case}")
    r = runs[0]
    ms = r["real_time"]  # milliseconds (the benchmarks' unit)
    if "GFLOPps" in r:
        return ms, ms * r["ratio"], r["GFLOPps"] * ms * 1e6
    return ms, ms * r["ratio"], r["GBps"] * ms * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peer", choices=("torch", "tf"), required=True)
    p.add_argument("--ours-bin", required=True)
    p.add_argument("--only", default="", help="comma-separated cases (default: all)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="16M elements instead of 64M")
    p.add_argument("--machine", default=f"{platform.node()}-{os.cpu_count()}cpu-nogpu")
    p.add_argument("--out", default="")
    o = p.parse_args()
    peer = Torch(o.threads) if o.peer == "torch" else TensorFlow(o.threads)
    n = (16 if o.quick else 64) << 20
    todo = cases(o.quick)
    if o.only:
        wanted = o.only.split(",")
        unknown = [c for c in wanted if c not in todo]
        if unknown:
            sys.exit(f"compare_math_ops: no case {', '.join(unknown)} (cases: {todo})")
        todo = [c for c in todo if c in wanted]
    name = "PyTorch" if o.peer == "torch" else "TensorFlow"
    result = {"context": {"machine": o.machine, "threads": o.threads, "peer": peer.version,
                          "elements": n, "rounds": o.rounds, "loadavg_start": os.getloadavg()},
              "results": []}
    for case in todo:
        ours_ms, limit_ms, their_ms = [], [], []
        for _ in range(o.rounds):
            ms, lim, moved = ours(o.ours_bin, case, o.quick, o.threads)
            ours_ms.append(ms)
            limit_ms.append(lim)
            their_ms.append(peer_ms(peer, case, n))
        e = {"case": case, "flops" if case.startswith("matmul/") else "bytes": moved, "ours_ms": statistics.median(ours_ms),
             "limit_ms": statistics.median(limit_ms), "peer_ms": statistics.median(their_ms),
             "ours_ms_per_round": ours_ms, "limit_ms_per_round": limit_ms,
             "peer_ms_per_round": their_ms}
        e["ours_ratio_to_limit"] = e["limit_ms"] / e["ours_ms"]
        e["peer_ratio_to_limit"] = e["limit_ms"] / e["peer_ms"]
        e["ours_over_peer"] = e["peer_ms"] / e["ours_ms"]
        print(f"{case:32s} varstate {e['ours_ms']:8.2f} ms ({e['ours_ratio_to_limit']:.2f} of the"
              f" limit)  {name} {e['peer_ms']:8.2f} ms ({e['peer_ratio_to_limit']:.2f})"
              f"  varstate/{name} {e['ours_over_peer']:.2f}x", flush=True)
        result["results"].append(e)
    result["context"]["loadavg_end"] = os.getloadavg()
    out = o.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"math-ops-vs-{o.peer}-{o.machine}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
