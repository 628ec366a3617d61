#!/usr/bin/env python3
"""TensorFlow's ops against varstate's benchmarks, interleaved in one run.

TensorFlow 2.21 in tf.compat.v1 graph mode, reference variables
(tf.compat.v1.Variable(..., use_resource=False): the RefVariable ops
ScatterUpdate/ScatterAdd/..., Assign/AssignAdd, Gather), intra- and
inter-op threads as --threads (2), ops run by Session.run(op) with constant
operands (nothing fed, nothing fetched), median of --rounds timed rounds.
Right before each TensorFlow measurement the matching varstate benchmark
runs (its binary, filtered to that one benchmark), so both see the same
machine load; ours/tf > 1 means varstate is faster. For the scatter cases
ours is the median of --rounds repetitions of the benchmark (each after one
untimed call per index set), as TensorFlow's is the median of --rounds
rounds after one untimed run of each op.

  scatter    bench_scatter (VARSTATE_BENCH_SET=tf): every scatter op and
             gather on [1M, 16] and [100k, 64], M in {1k, 65k, 1M}, uniform
             and Zipf(1.05) indices (the same draws as scatter_bench.cc);
  dense      bench_dense_update BM_cpu_assign / BM_cpu_assign_add (4, 64 MiB);
  init       bench_random BM_cpu_{random_uniform,random_normal,
             truncated_normal}_op (16, 64 MiB, its quick sizes): a new tensor
             per call;
  partitioned  bench_sharing BM_partitioned_scatter_add_cpu (quick size:
             [1M, 64] in 4 parts, 65,536 updates) against TensorFlow's way
             for a partitioned variable: dynamic_partition of indices and
             rows, then scatter_add on each part;
  memory     bench_variables BM_initializer_rss/256 against the resident
             growth of a TensorFlow process holding the same 256 MiB of
             glorot_uniform variables (each in a fresh process).

Writes bench/results/compare-tf-ops-<machine>.json (--out to change) with
the load average before and after each pair.

  ~/.cache/varstate/venv-tf2.21/bin/python bench/compare_tf_ops.py \\
      --build build --machine vm-2cpu-nogpu [--only scatter,dense] [--filter 'M65536|update.*M1048576']
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
ZIPF_S = 1.05
MIB = 1 << 20


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def draw_indices(dist, rows, m, seed):
    """The index draws of scatter_bench.cc's shapes (same distribution, not bits)."""
    rng = np.random.default_rng(seed)
    if dist == "uniform":
        return rng.integers(0, rows, size=m, dtype=np.int64)
    ranks = np.arange(1, rows + 1, dtype=np.float64)
    cdf = np.cumsum(ranks ** -ZIPF_S)
    cdf /= cdf[-1]
    rank = np.minimum(np.searchsorted(cdf, rng.random(m)), rows - 1).astype(np.uint64)
    return ((rank * np.uint64(2654435761)) % np.uint64(rows)).astype(np.int64)


def session(threads):
    config = tf1.ConfigProto(intra_op_parallelism_threads=threads,
                             inter_op_parallelism_threads=threads)
    return tf1.Session(config=config)


def timed(sess, ops, rounds, reps):
    """Median seconds per call of running ops[k % len(ops)]."""
    for op in ops:
        sess.run(op)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for k in range(reps):
            sess.run(ops[k % len(ops)])
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times)


def run_ours(binary, pattern, env=None, repetitions=1):
    """The Google Benchmark JSON record of the one benchmark matching pattern:
    with repetitions > 1, the median of that many runs (as TensorFlow's side
    takes the median of its rounds)."""
    full_env = dict(os.environ, **(env or {}))
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, f"--benchmark_filter={pattern}", f"--benchmark_out={out.name}",
                        "--benchmark_out_format=json",
                        f"--benchmark_repetitions={repetitions}"], check=True,
                       capture_output=True, env=full_env)
        data = json.load(open(out.name))
    medians = [b for b in data["benchmarks"] if b.get("aggregate_name") == "median"]
    if repetitions > 1 and medians:
        return medians[0]
    runs = [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    return runs[0] if runs else None


def seconds_of(record):
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[record.get("time_unit", "ns")]
    return record["real_time"] * scale


# ---------------------------------------------------------------------------
# Cases: each returns (name, tf_seconds_fn, ours_fn) pairs.

SCATTER_OPS = {"update": tf1.scatter_update, "add": tf1.scatter_add, "sub": tf1.scatter_sub,
               "mul": tf1.scatter_mul, "div": tf1.scatter_div, "min": tf1.scatter_min,
               "max": tf1.scatter_max}


def scatter_cases(args):
    for rows, width in ((1_000_000, 16), (100_000, 64)):
        for m in (1024, 65536, 1048576):
            for dist in ("uniform", "zipf1.05"):
                for op in list(SCATTER_OPS) + ["gather"]:
                    if op == "gather":
                        name = f"gather/cpu/serial-order/N{rows}xD{width}/M{m}/{dist}/i64/f32"
                    else:
                        name = f"scatter/cpu/{op}/serial-order/N{rows}xD{width}/M{m}/{dist}/i64/f32"
                    yield name, (lambda rows=rows, width=width, m=m, dist=dist, op=op:
                                 tf_scatter(args, rows, width, m, dist, op))


def tf_scatter(args, rows, width, m, dist, op):
    graph = tf.Graph()
    with graph.as_default():
        mul_like = op in ("mul", "div")
        var = tf1.Variable(tf.fill([rows, width], 1.0 if mul_like else 0.0), use_resource=False)
        ops = []
        for k in range(4):  # fresh indices for consecutive calls, as bench_scatter
            idx = tf.constant(draw_indices(dist, rows, m, 7 + k))
            rng = np.random.default_rng(11 + k)
            if mul_like:
                upd = np.where(rng.random((m, width)) < 0.5, 1 + 1 / 1024, 1 - 1 / 1024)
            else:
                upd = rng.uniform(-1, 1, (m, width))
            if op == "gather":
                ops.append(tf.gather(var, idx).op)
            else:
                ops.append(SCATTER_OPS[op](var, idx, tf.constant(upd.astype(np.float32))).op)
        with session(args.threads) as sess:
            sess.run(var.initializer)
            reps = 2 if m >= 1_000_000 else 10 if m >= 65536 else 200
            return timed(sess, ops, args.rounds, reps)


def dense_cases(args):
    for mib in (4, 64):
        for add in (False, True):
            name = f"BM_cpu_{'assign_add' if add else 'assign'}/{mib}"
            yield name, (lambda mib=mib, add=add: tf_dense(args, mib, add))


def tf_dense(args, mib, add):
    n = mib * MIB // 4
    graph = tf.Graph()
    with graph.as_default():
        var = tf1.Variable(tf.zeros([n]), use_resource=False)
        value = tf.Variable(tf.zeros([n]))  # a tensor held by the graph, as ours
        op = (tf1.assign_add(var, value.value()) if add else tf1.assign(var, value.value())).op
        with session(args.threads) as sess:
            sess.run([var.initializer, value.initializer])
            return timed(sess, [op], args.rounds, 100 if mib <= 4 else 10)


INITS = {"random_uniform": lambda n: tf.random.uniform([n], seed=1),
         "random_normal": lambda n: tf.random.normal([n], seed=1),
         "truncated_normal": lambda n: tf.random.truncated_normal([n], seed=1)}


def init_cases(args):
    for dist in INITS:
        for mib in (16, 64):
            yield f"BM_cpu_{dist}_op/{mib}", (lambda dist=dist, mib=mib: tf_init(args, dist, mib))


def tf_init(args, dist, mib):
    graph = tf.Graph()
    with graph.as_default():
        op = INITS[dist](mib * MIB // 4).op
        with session(args.threads) as sess:
            return timed(sess, [op], args.rounds, 5)


def partitioned_cases(args):
    yield "BM_partitioned_scatter_add_cpu", lambda: tf_partitioned(args)


def tf_partitioned(args):
    rows, width, m, parts = 1_000_000, 64, 65536, 4
    graph = tf.Graph()
    with graph.as_default():
        var = tf1.get_variable("emb", [rows, width], initializer=tf1.zeros_initializer(),
                               partitioner=tf1.fixed_size_partitioner(parts), use_resource=False)
        pieces = list(var)
        bounds = np.cumsum([0] + [int(p.shape[0]) for p in pieces])
        rng = np.random.default_rng(20261124)
        idx = tf.constant(rng.integers(0, rows, size=m, dtype=np.int64))
        upd = tf.fill([m, width], 0.5)
        which = tf.cast(tf.searchsorted(tf.constant(bounds[1:], dtype=tf.int64), idx,
                                        side="right"), tf.int32)
        part_idx = tf.dynamic_partition(idx, which, parts)
        part_upd = tf.dynamic_partition(upd, which, parts)
        ops = [tf1.scatter_add(p, part_idx[k] - int(bounds[k]), part_upd[k])
               for k, p in enumerate(pieces)]
        step = tf.group(*ops)
        with session(args.threads) as sess:
            sess.run(tf1.global_variables_initializer())
            return timed(sess, [step], args.rounds, 4)


def tf_rss_per_byte(mib):
    """Resident growth per variable byte of a fresh TF process holding mib MiB."""
    code = f"""
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
tf1 = tf.compat.v1
tf1.disable_eager_execution()
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
rows, cols = 1024, 16 * (1 << 20) // (1024 * 4)
sess = tf1.Session()
before = rss()
vs = [tf1.get_variable("w%d" % i, [rows, cols], initializer=tf1.glorot_uniform_initializer(seed=1),
                       use_resource=False) for i in range({mib} // 16)]
sess.run(tf1.global_variables_initializer())
print((rss() - before) / ({mib} << 20))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="build folder with bench/ binaries")
    ap.add_argument("--machine", default=platform.node())
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="scatter,dense,init,partitioned,memory")
    ap.add_argument("--filter", default="", help="only cases whose name matches this regex")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    tf1.disable_eager_execution()
    bench = os.path.join(args.build, "bench")
    sections = {
        "scatter": (scatter_cases, "bench_scatter", {"VARSTATE_BENCH_SET": "tf"}),
        "dense": (dense_cases, "bench_dense_update", {}),
        "init": (init_cases, "bench_random", {"VARSTATE_BENCH_QUICK": "1"}),
        "partitioned": (partitioned_cases, "bench_sharing", {"VARSTATE_BENCH_QUICK": "1"}),
    }
    meta = {"tensorflow": tf.__version__, "variables": "reference (use_resource=False)",
            "threads": args.threads, "rounds": args.rounds, "machine": args.machine,
            "host": platform.node(), "cpus": os.cpu_count(), "zipf_s": ZIPF_S}
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                   f"compare-tf-ops-{args.machine}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    results = []

    def save():  # after each case, so that an interrupted run keeps what it measured
        with open(out, "w") as f:
            json.dump({"context": meta, "results": results}, f, indent=1)

    for section in args.only.split(","):
        if section == "memory":
            load0 = loadavg()
            ours = run_ours(os.path.join(bench, "bench_variables"), "^BM_initializer_rss/256")
            theirs = tf_rss_per_byte(256)
            r = {"section": "memory", "name": "BM_initializer_rss/256",
                 "ours_rss_per_byte": ours["rss_per_byte"], "tf_rss_per_byte": theirs,
                 "tf_over_ours": theirs / ours["rss_per_byte"], "load": [load0, loadavg()]}
            results.append(r)
            print(f"{'memory: resident bytes per variable byte (256 MiB)':72s} ours "
                  f"{r['ours_rss_per_byte']:.3f}  tf {theirs:.3f}", flush=True)
            save()
            continue
        cases, binary, env = sections[section]
        for name, tf_fn in cases(args):
            if not re.search(args.filter, name):
                continue
            load0 = loadavg()
            pattern = "^" + name.replace(".", "[.]") + "(/|$)"
            ours = run_ours(os.path.join(bench, binary), pattern, env,
                            repetitions=args.rounds if section == "scatter" else 1)
            if ours is None:
                print(f"{name}: no such varstate benchmark", file=sys.stderr)
                continue
            ours_s = seconds_of(ours)
            if section == "partitioned":  # manual time of 4 calls per iteration
                ours_s /= 4
            tf_s = tf_fn()
            r = {"section": section, "name": name, "ours_s": ours_s, "tf_s": tf_s,
                 "ours_over_tf": tf_s / ours_s, "load": [load0, loadavg()]}
            results.append(r)
            print(f"{name:72s} ours {ours_s * 1e3:9.3f} ms  tf {tf_s * 1e3:9.3f} ms  "
                  f"ours/tf {r['ours_over_tf']:6.2f}  load {load0:.1f}", flush=True)
            save()
    save()
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
