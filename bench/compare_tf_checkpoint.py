#!/usr/bin/env python3
"""Saver save and restore against TensorFlow's: the same variables saved by
varstate's Saver and by tf.compat.v1.train.Saver, interleaved.

The variables: 256 MiB and 1 GiB (--mib) of float32 in the mixed sizes of
bench_checkpoint (4M, 1M, 256K, 64K, 16K, 4K, 1K elements, repeated), each
made by get_variable with a seeded random_uniform_initializer. Both sides
save with their defaults, meta graph included (TensorFlow's Saver().save()
writes "PREFIX.meta" too), into VARSTATE_BENCH_DIR (default
/tmp/varstate_ckpt_bench).

varstate's side is bench_checkpoint's BM_SaveInitializers (sync:1 fsyncs
every file and directory, the default; sync:0 is SaverOptions::sync =
false) and BM_RestoreInitializers, 3 iterations each. TensorFlow never
fsyncs; its save is also timed followed by an fsync of its files (the same
durability as varstate's default). Restores drop the page cache first when
the process may (root). Each side's time is the mean of 3 iterations;
reported: the best mean over --reps of each, the ratios (TensorFlow
time / varstate time: above 1 means varstate is faster) and both meta-graph
sizes. Prints one JSON object (also written to --out).

With --many N (no --mib runs then): N variables of 256 floats each
(seeded random_uniform initializers), saved with the defaults, meta graph
included, where the work per variable outweighs the bytes: varstate's
BM_SaveManyVariables/count:N (5 saves, fsyncs included) against
TensorFlow's save followed by an fsync of its files, --reps rounds
interleaved, the best mean of each.

  ~/.cache/varstate/venv-tf2.21/bin/python bench/compare_tf_checkpoint.py \\
      --bench build/bench/bench_checkpoint [--mib 256 1024] [--reps 2] [--out FILE]
  ~/.cache/varstate/venv-tf2.21/bin/python bench/compare_tf_checkpoint.py \\
      --bench build/bench/bench_checkpoint --many 4096 [--reps 3]
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import time

from checkpoint_files import drop_page_cache, fsync_files, mixed_sizes


def clear(directory):
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)


class TfModel:
    """The variables in a TensorFlow graph, initialized, with a Saver."""

    def __init__(self, tf, mib, sizes=None):
        self.tf = tf
        self.graph = tf.Graph()
        with self.graph.as_default():
            for i, n in enumerate(sizes or mixed_sizes(mib << 20)):
                init = tf.compat.v1.random_uniform_initializer(seed=i + 1)
                tf.compat.v1.get_variable(f"v{i}", [n], initializer=init)
            self.count = i + 1
            init_op = tf.compat.v1.global_variables_initializer()
            self.saver = tf.compat.v1.train.Saver()
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2,
                                          inter_op_parallelism_threads=2)
        self.sess = tf.compat.v1.Session(graph=self.graph, config=config)
        self.sess.run(init_op)

    def save(self, directory, sync):
        clear(directory)
        prefix = os.path.join(directory, "initialized")
        os.sync()
        t0 = time.perf_counter()
        self.saver.save(self.sess, prefix)
        if sync:
            fsync_files(sorted(glob.glob(prefix + ".*")) + [os.path.join(directory, "checkpoint")])
        seconds = time.perf_counter() - t0
        return seconds, os.path.getsize(prefix + ".meta")

    def restore(self, directory):
        prefix = os.path.join(directory, "initialized")
        dropped = drop_page_cache()
        t0 = time.perf_counter()
        self.saver.restore(self.sess, prefix)
        return time.perf_counter() - t0, dropped


def run_varstate(bench, mib, directory):
    """BM_SaveInitializers (sync 1 and 0) and BM_RestoreInitializers at `mib`."""
    pattern = f"^BM_(SaveInitializers/mib:{mib}/|RestoreInitializers/mib:{mib}/)"
    env = dict(os.environ, VARSTATE_BENCH_DIR=directory)
    out = subprocess.run([bench, f"--benchmark_filter={pattern}", "--benchmark_format=json"],
                         check=True, capture_output=True, text=True, env=env).stdout
    result = {}
    for b in json.loads(out)["benchmarks"]:
        key = ("save_sync" if "sync:1" in b["name"] else "save_nosync") \
            if "Save" in b["name"] else "restore"
        result[key] = {"mean_s": b["real_time"] / 1e3, "GBps": b["GBps"]}
        if "meta_bytes" in b:
            result["meta_bytes"] = int(b["meta_bytes"])
            result["variables"] = int(b["variables"])
        if "cache_dropped" in b:
            result["cache_dropped"] = bool(b["cache_dropped"])
    return result


def finish(result, out):
    """Stamps the load at the end, prints the result and writes it to `out`."""
    result["loadavg_end"] = os.getloadavg()
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def run_many(tf, o, vs_dir, tf_dir):
    """--many: BM_SaveManyVariables/count:N against TensorFlow's save + fsync."""
    model = TfModel(tf, 0, sizes=[256] * o.many)
    env = dict(os.environ, VARSTATE_BENCH_DIR=vs_dir)
    ours, theirs = [], []
    for _ in range(o.reps):  # interleaved
        out = subprocess.run([o.bench, f"--benchmark_filter=^BM_SaveManyVariables/count:{o.many}/",
                              "--benchmark_format=json"],
                             check=True, capture_output=True, text=True, env=env).stdout
        b = json.loads(out)["benchmarks"][0]
        ours.append({"mean_s": b["real_time"] / 1e3, "meta_bytes": int(b["meta_bytes"])})
        saves = [model.save(tf_dir, True) for _ in range(5)]
        theirs.append({"mean_s": sum(s for s, _ in saves) / 5, "meta_bytes": saves[-1][1]})
    shutil.rmtree(tf_dir, ignore_errors=True)
    model.sess.close()
    best_ours = min(r["mean_s"] for r in ours)
    best_theirs = min(r["mean_s"] for r in theirs)
    summary = {"variables": o.many, "varstate_save_fsync_s": best_ours,
               "tensorflow_save_then_fsync_s": best_theirs,
               "ratio_save_fsync_vs_tf_save_then_fsync": best_theirs / best_ours,
               "varstate_meta_bytes": ours[-1]["meta_bytes"],
               "tensorflow_meta_bytes": theirs[-1]["meta_bytes"]}
    print(f"{o.many} variables: " + ", ".join(f"{k} {v:.3g}" for k, v in summary.items()),
          flush=True)
    return {"summary": summary, "varstate": ours, "tensorflow": theirs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default="build/bench/bench_checkpoint")
    ap.add_argument("--mib", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default="")
    ap.add_argument("--many", type=int, default=0,
                    help="instead: N variables of 256 floats (the meta graph's share)")
    o = ap.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.compat.v1.disable_v2_behavior()  # graph mode, reference variables

    directory = os.environ.get("VARSTATE_BENCH_DIR", "/tmp/varstate_ckpt_bench")
    vs_dir, tf_dir = os.path.join(directory, "varstate"), os.path.join(directory, "tensorflow")
    os.makedirs(vs_dir, exist_ok=True)
    result = {"tensorflow_version": tf.__version__, "loadavg_start": os.getloadavg(), "sizes": {}}
    if o.many:
        result["many"] = run_many(tf, o, vs_dir, tf_dir)
        return finish(result, o.out)
    for mib in o.mib:
        model = TfModel(tf, mib)
        runs = {"varstate": [], "tensorflow": []}
        for _ in range(o.reps):  # interleaved
            runs["varstate"].append(run_varstate(o.bench, mib, vs_dir))
            tf_run = {"variables": model.count}
            for key, sync in (("save", False), ("save_fsync", True)):
                saves = [model.save(tf_dir, sync) for _ in range(3)]
                tf_run[key] = {"mean_s": sum(s for s, _ in saves) / 3}
                tf_run["meta_bytes"] = saves[-1][1]
            restores = [model.restore(tf_dir) for _ in range(3)]
            tf_run["restore"] = {"mean_s": sum(s for s, _ in restores) / 3}
            tf_run["cache_dropped"] = all(d for _, d in restores)
            runs["tensorflow"].append(tf_run)
        shutil.rmtree(tf_dir, ignore_errors=True)
        model.sess.close()

        def best(side, key):
            return min(r[key]["mean_s"] for r in runs[side])

        summary = {
            "variables": model.count,
            "varstate_meta_bytes": runs["varstate"][-1]["meta_bytes"],
            "tensorflow_meta_bytes": runs["tensorflow"][-1]["meta_bytes"],
            "varstate_save_fsync_s": best("varstate", "save_sync"),
            "varstate_save_nofsync_s": best("varstate", "save_nosync"),
            "tensorflow_save_s": best("tensorflow", "save"),
            "tensorflow_save_then_fsync_s": best("tensorflow", "save_fsync"),
            "varstate_restore_s": best("varstate", "restore"),
            "tensorflow_restore_s": best("tensorflow", "restore"),
        }
        summary["ratio_save_fsync_vs_tf_save"] = (summary["tensorflow_save_s"] /
                                                  summary["varstate_save_fsync_s"])
        summary["ratio_save_fsync_vs_tf_save_then_fsync"] = (
            summary["tensorflow_save_then_fsync_s"] / summary["varstate_save_fsync_s"])
        summary["ratio_save_nofsync_vs_tf_save"] = (summary["tensorflow_save_s"] /
                                                    summary["varstate_save_nofsync_s"])
        summary["ratio_restore"] = summary["tensorflow_restore_s"] / summary["varstate_restore_s"]
        result["sizes"][f"{mib}MiB"] = {"summary": summary, **runs}
        print(f"{mib} MiB: " + ", ".join(f"{k} {v:.3g}" for k, v in summary.items()), flush=True)
    finish(result, o.out)


if __name__ == "__main__":
    main()
