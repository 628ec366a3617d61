#!/usr/bin/env python3
"""The default CPU pool against VARSTATE_CPU_THREADS=1, interleaved.

Runs each selected Google Benchmark of the given binaries alternately with
the default pool and with one thread, --rounds times, and prints the median
time of each and default/one-thread speedup (> 1: the pool helps; the goal
is >= 0.95 everywhere, >= 1.6 for large dense, random and scatter ops on an
idle 2-core machine), with the load average around each pair. Saves JSON.

  python3 bench/compare_threads.py --build build --machine vm-2cpu-nogpu \\
      bench_scatter='^scatter/cpu/(update|add)/.*/M65536/' bench_dense_update='^BM_cpu_assign'
(VARSTATE_BENCH_SET=tf is set for bench_scatter, so its names are the
shapes of compare_tf_ops.py.)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(binary, pattern, threads):
    env = dict(os.environ, VARSTATE_BENCH_SET="tf")
    env.pop("VARSTATE_CPU_THREADS", None)
    if threads:
        env["VARSTATE_CPU_THREADS"] = str(threads)
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, f"--benchmark_filter={pattern}", f"--benchmark_out={out.name}",
                        "--benchmark_out_format=json"], check=True, capture_output=True, env=env)
        data = json.load(open(out.name))
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
    return {b["name"].split("/iterations:")[0]: b["real_time"] * scale[b["time_unit"]]
            for b in data["benchmarks"] if b.get("run_type") == "iteration"}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--machine", default="local")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="")
    ap.add_argument("selections", nargs="+", help="BINARY=REGEX")
    args = ap.parse_args()
    results = {}
    for sel in args.selections:
        binary, pattern = sel.split("=", 1)
        path = os.path.join(args.build, "bench", binary)
        for _ in range(args.rounds):
            load0 = loadavg()
            default = run(path, pattern, None)
            one = run(path, pattern, 1)
            for name in default:
                r = results.setdefault(name, {"default_s": [], "one_s": [], "load": []})
                r["default_s"].append(default[name])
                r["one_s"].append(one.get(name, float("nan")))
                r["load"].append([load0, loadavg()])
    rows = []
    for name, r in results.items():
        d, o = statistics.median(r["default_s"]), statistics.median(r["one_s"])
        rows.append({"name": name, "default_s": d, "one_thread_s": o, "speedup": o / d,
                     "runs": r})
        print(f"{name:72s} default {d * 1e3:9.3f} ms  1 thread {o * 1e3:9.3f} ms  "
              f"speedup {o / d:5.2f}  load {r['load'][0][0]:.1f}", flush=True)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   f"threads-default-vs-1-{args.machine}.json")
    with open(out, "w") as f:
        json.dump({"machine": args.machine, "cpus": os.cpu_count(), "rounds": args.rounds,
                   "results": rows}, f, indent=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
