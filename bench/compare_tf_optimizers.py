#!/usr/bin/env python3
"""TensorFlow's compat.v1 optimizers on the configurations of bench_optimizer.

For each sparse configuration of bench/optimizer_bench.cc — a [N, 64]
float32 table, 65,536 uniform ids per step, AdagradOptimizer and
AdamOptimizer (ref variables, as TensorFlow 1.x; its sparse Adam updates
every row) — and dense Adam on 64M elements, and the four optimizers
added on 2026-11-30 (Adadelta, ProximalGradientDescent, ProximalAdagrad,
AdagradDA; sparse and dense, l1 = l2 = 0.001), and
ExponentialMovingAverage(0.999).apply over 64M elements, TensorFlow runs one
apply_gradients (or the averages' update) per session.run with intra- and inter-op threads set to
--threads, and the matching bench_optimizer benchmark runs right before
it (--ours-bin), so both see the same machine load. Prints and stores
ours / TensorFlow (steps per second) and the bytes-moved bandwidth of each.
Run with the TensorFlow venv and VARSTATE_CPU_THREADS = --threads:

  VARSTATE_CPU_THREADS=2 ~/.cache/varstate/venv-tf2.21/bin/python \\
      bench/compare_tf_optimizers.py --threads 2 --ours-bin build/bench/bench_optimizer \\
      --out bench/results/optimizers-vs-tf-cpu.json
"""
import argparse
import json
import os
import platform
import subprocess
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_resource_variables()

IDS = 65_536
WIDTH = 64


def configs(quick):
    rows = 262_144 if quick else 1_000_000
    dense = (16 if quick else 64) << 20
    out = [("adagrad", "default", rows, WIDTH, IDS),
           ("adam", "default", rows, WIDTH, IDS),
           ("adam", "dense", dense, WIDTH, 0)]
    for op in ("adadelta", "proximal-sgd", "proximal-adagrad", "adagrad-da"):
        out += [(op, "default", rows, WIDTH, IDS), (op, "dense", dense, WIDTH, 0)]
    out.append(("moving-average", "dense", dense, WIDTH, 0))
    return out


# The slots of the optimizers of the second group (bench/optimizer_bench.cc).
SLOTS = {"adadelta": 2, "proximal-sgd": 0, "proximal-adagrad": 1, "adagrad-da": 2,
         "moving-average": 0}


def make_optimizer(op):
    if op == "adagrad":
        return tf1.train.AdagradOptimizer(0.01)
    if op == "adam":
        return tf1.train.AdamOptimizer(0.01)
    if op == "adadelta":
        return tf1.train.AdadeltaOptimizer(0.01, rho=0.95, epsilon=1e-8)
    if op == "proximal-sgd":
        return tf1.train.ProximalGradientDescentOptimizer(
            0.01, l1_regularization_strength=0.001, l2_regularization_strength=0.001)
    if op == "proximal-adagrad":
        return tf1.train.ProximalAdagradOptimizer(
            0.01, l1_regularization_strength=0.001, l2_regularization_strength=0.001)
    step = tf1.Variable(np.int64(99), name="global_step", trainable=False)  # step 100
    return tf1.train.AdagradDAOptimizer(
        0.01, step, l1_regularization_strength=0.001, l2_regularization_strength=0.001)


def bench_name(op, path, rows, width, ids):
    return f"optimizer/cpu/{op}/{path}/N{rows}xD{width}/M{ids}"


def moved_bytes(op, path, rows, width, ids, unique):
    row = 4.0 * width
    if op in SLOTS:
        slots = SLOTS[op]
        return 4.0 * rows * (3 + 2 * slots) if path == "dense" else ids * row + unique * row * 2 * (1 + slots)
    if path == "dense":
        return 4.0 * rows * 7
    if op == "adagrad":
        return ids * row + unique * row * 4
    return ids * row + rows * row * 6


def run_tensorflow(op, path, rows, width, ids, threads, steps):
    rng = np.random.default_rng(20261125)
    config = tf1.ConfigProto(intra_op_parallelism_threads=threads,
                             inter_op_parallelism_threads=threads)
    with tf1.Graph().as_default():
        shape = [rows] if path == "dense" else [rows, width]
        var = tf1.Variable(tf.fill(shape, 0.5), name="var")
        if path == "dense":
            grad = tf.constant(rng.uniform(-1, 1, shape).astype(np.float32))
        else:
            ids_v = rng.integers(0, rows, size=ids, dtype=np.int64)
            values = rng.uniform(-1, 1, [ids, width]).astype(np.float32)
            grad = tf.IndexedSlices(tf.constant(values), tf.constant(ids_v),
                                    tf.constant(shape, tf.int64))
        if op == "moving-average":
            train = tf1.train.ExponentialMovingAverage(0.999).apply([var])
        else:
            train = make_optimizer(op).apply_gradients([(grad, var)])
        with tf1.Session(config=config) as sess:
            # The variable first: a moving average's initializer reads it.
            sess.run(var.initializer)
            sess.run(tf1.global_variables_initializer())
            sess.run(train)
            best = float("inf")
            for _ in range(steps):
                start = time.perf_counter()
                sess.run(train)
                best = min(best, time.perf_counter() - start)
    return best


def run_ours(binary, name):
    pattern = "^" + name.replace("/", "/") + "/"
    out = subprocess.run([binary, f"--benchmark_filter={pattern}", "--benchmark_format=json"],
                         capture_output=True, text=True, check=True).stdout
    runs = [b for b in json.loads(out)["benchmarks"] if "steps_per_s" in b]
    return runs[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--ours-bin", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--only", default="", help="comma-separated ops (default: all)")
    args = parser.parse_args()
    results = []
    for op, path, rows, width, ids in configs(args.quick):
        if args.only and op not in args.only.split(","):
            continue
        name = bench_name(op, path, rows, width, ids)
        env_quick = os.environ.get("VARSTATE_BENCH_QUICK")
        if args.quick:
            os.environ["VARSTATE_BENCH_QUICK"] = "1"
        ours = run_ours(args.ours_bin, name)
        if env_quick is None:
            os.environ.pop("VARSTATE_BENCH_QUICK", None)
        seconds = run_tensorflow(op, path, rows, width, ids, args.threads, args.steps)
        unique = len(np.unique(np.random.default_rng(20261125).integers(0, rows, size=ids))) if ids else 0
        tf_steps = 1.0 / seconds
        result = {"name": name, "ours_steps_per_s": ours["steps_per_s"], "tf_steps_per_s": tf_steps,
                  "ours_over_tf": ours["steps_per_s"] / tf_steps, "ours_ratio_to_memcpy": ours["ratio"],
                  "tf_GBps": moved_bytes(op, path, rows, width, ids, unique) / seconds / 1e9}
        results.append(result)
        print(f"{name}: ours {ours['steps_per_s']:.2f} steps/s, TF {tf_steps:.2f} steps/s, "
              f"ours/TF {result['ours_over_tf']:.2f}, ours/memcpy {ours['ratio']:.2f}")
    if args.out:
        meta = {"machine": platform.node(), "threads": args.threads, "tensorflow": tf.__version__,
                "cpus": os.cpu_count(), "loadavg_end": os.getloadavg()}
        with open(args.out, "w") as f:
            json.dump({"context": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
