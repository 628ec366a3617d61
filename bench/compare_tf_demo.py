#!/usr/bin/env python3
"""The main job against TensorFlow: `varstate demo` and the same model in
TensorFlow's tf.compat.v1 graph mode, run interleaved on this machine.

The model of tools/cli/demo_command.cc: user and item embedding tables
(get_variable under variable_scope with fixed_size_partitioner(2) and a
random_normal_initializer of stddev 0.5 rank^-1/4), a mini-batch per step,
loss = sum over the batch of (u.v - rating)^2 / 2 + l2 (|u|^2 + |v|^2) / 2,
GradientDescentOptimizer(learning_rate).minimize(loss, global_step): the
embedding lookups give sparse (IndexedSlices) gradients, applied to the rows
with scatter_sub. Reference variables, 2 intra-op and 2 inter-op threads.

The ratings are the demo's own: demo_data.cc's SplitMix64 generator and
Box-Muller transform redone in NumPy (checked equal bit for bit at small
sizes; NumPy's log/cos could round a rare value differently from the C
library's). The batch order (a NumPy permutation per epoch, the same in
every repetition) and the initial values (each library's own seeded
generator) differ: the RMSEs agree statistically, not bit for bit.

Throughput counts the training steps only: varstate's "train_seconds"
(--json, without the checkpoint saves; the demo saves once, at the end), and
TensorFlow's loop of sess.run(train_op, feed_dict). Prints one JSON object
(also written to --out) with each run, the best steps/s of each and their
ratio, and the test RMSEs.

  ~/.cache/varstate/venv-tf2.21/bin/python bench/compare_tf_demo.py \\
      --varstate build/tools/cli/varstate [--steps 4000] [--reps 3] [--also_one_thread]
      [--out FILE]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np

MASK = (1 << 64) - 1


def splitmix64(seed_state, first, count):
    """Outputs first+1 .. first+count of demo_data.cc's Rng(seed_state)."""
    i = np.arange(first + 1, first + count + 1, dtype=np.uint64)
    z = np.uint64(seed_state) + i * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform(bits):
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def box_muller(bits):
    """Rng::normal() on consecutive pairs of outputs (u1 first)."""
    u1 = 1.0 - uniform(bits[0::2])
    u2 = uniform(bits[1::2])
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


def make_dataset(users, items, rank, per_user, noise, seed):
    """demo_data.cc's make_dataset: (train, test) as (user, item, value) arrays."""
    state = (seed * 0x2545F4914F6CDD1D + 1) & MASK
    scale = rank**-0.25
    at = 0
    u = (scale * box_muller(splitmix64(state, at, 2 * users * rank))).astype(np.float32)
    at += 2 * users * rank
    v = (scale * box_muller(splitmix64(state, at, 2 * items * rank))).astype(np.float32)
    at += 2 * items * rank
    u, v = u.reshape(users, rank), v.reshape(items, rank)
    # Per rating, in order: below(items), then the noise's two outputs.
    bits = splitmix64(state, at, 3 * users * per_user).reshape(-1, 3)
    item = (uniform(bits[:, 0]) * items).astype(np.int64)
    noise_draw = box_muller(bits[:, 1:].reshape(-1))
    user = np.repeat(np.arange(users, dtype=np.int64), per_user)
    dot = np.zeros(user.size, dtype=np.float64)
    for j in range(rank):  # float products summed in double, in order
        dot += (u[user, j] * v[item, j]).astype(np.float64)
    value = (dot + noise * noise_draw).astype(np.float32)
    test = (np.arange(user.size) % per_user) % 10 == 9
    split = lambda m: (user[m], item[m], value[m])
    return split(~test), split(test)


def tf_model(tf, o):
    """The demo's graph; returns (session, init_op, train_op, placeholders, tables)."""
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.set_random_seed(o.seed)
        stddev = 0.5 * o.rank**-0.25
        uid = tf.compat.v1.placeholder(tf.int64, [None], "user_ids")
        iid = tf.compat.v1.placeholder(tf.int64, [None], "item_ids")
        rating = tf.compat.v1.placeholder(tf.float32, [None], "ratings")
        part = tf.compat.v1.fixed_size_partitioner(2)
        with tf.compat.v1.variable_scope("recommender", partitioner=part):
            tables = []
            for name, rows, seed in (("users", o.users, 1), ("items", o.items, 2)):
                with tf.compat.v1.variable_scope(name):
                    init = tf.compat.v1.random_normal_initializer(stddev=stddev, seed=seed)
                    tables.append(tf.compat.v1.get_variable("embedding", [rows, o.rank],
                                                            initializer=init))
        step = tf.compat.v1.train.get_or_create_global_step()
        u = tf.compat.v1.nn.embedding_lookup(tables[0], uid, partition_strategy="div")
        v = tf.compat.v1.nn.embedding_lookup(tables[1], iid, partition_strategy="div")
        err = tf.reduce_sum(u * v, axis=1) - rating
        loss = 0.5 * tf.reduce_sum(tf.square(err)) + 0.5 * o.l2 * (
            tf.reduce_sum(tf.square(u)) + tf.reduce_sum(tf.square(v)))
        opt = tf.compat.v1.train.GradientDescentOptimizer(o.learning_rate)
        train_op = opt.minimize(loss, global_step=step)
        init_op = tf.compat.v1.global_variables_initializer()
        full = [tf.concat(t._get_variable_list(), axis=0) for t in tables]
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=2,
                                      inter_op_parallelism_threads=2)
    sess = tf.compat.v1.Session(graph=graph, config=config)
    return sess, init_op, train_op, (uid, iid, rating), full


def rmse(users, items, data):
    user, item, value = data
    pred = np.einsum("ij,ij->i", users[user], items[item])
    return float(np.sqrt(np.mean((pred - value).astype(np.float64) ** 2)))


def run_tf(tf, model, train, test, o):
    sess, init_op, train_op, (uid, iid, rating), full = model
    sess.run(init_op)
    before = rmse(*sess.run(full), test)
    n, b = train[0].size, o.batch_size
    per_epoch = (n + b - 1) // b
    order = None
    t0 = time.perf_counter()
    for step in range(o.steps):
        if step % per_epoch == 0:
            order = np.random.default_rng([o.seed, step // per_epoch]).permutation(n)
        pos = order[(step % per_epoch) * b:(step % per_epoch + 1) * b]
        sess.run(train_op, {uid: train[0][pos], iid: train[1][pos], rating: train[2][pos]})
    seconds = time.perf_counter() - t0
    users, items = sess.run(full)
    return {"steps": o.steps, "train_seconds": seconds, "steps_per_s": o.steps / seconds,
            "rmse_before": before, "rmse_after": rmse(users, items, test),
            "rmse_train": rmse(users, items, train)}


def run_varstate(o, workdir, rep, threads=None, device="cpu"):
    """One `varstate demo --device DEVICE` run; `threads` sets VARSTATE_CPU_THREADS."""
    out = os.path.join(workdir, f"demo-{rep}-{threads}-{device}.json")
    ckpt = os.path.join(workdir, f"ckpt-{rep}-{threads}-{device}")
    env = dict(os.environ)
    if threads:
        env["VARSTATE_CPU_THREADS"] = str(threads)
    cmd = [o.varstate, "demo", "--device", device, "--checkpoint_dir", ckpt, "--json", out,
           "--users", str(o.users), "--items", str(o.items), "--rank", str(o.rank),
           "--ratings_per_user", str(o.ratings_per_user), "--noise", str(o.noise),
           "--steps", str(o.steps), "--batch_size", str(o.batch_size),
           "--learning_rate", str(o.learning_rate), "--l2", str(o.l2),
           "--seed", str(o.seed), "--save_every", str(o.steps), "--max_to_keep", "1"]
    if o.shards > 0:
        cmd += ["--shards", str(o.shards)]
    if getattr(o, "atomic_scatters", False):
        cmd += ["--atomic_scatters"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        return json.load(f)


def add_job_arguments(ap):
    """The main job's size, model and training options, shared with the
    other side-by-side scripts (compare_torch_demo.py); defaults as the demo's."""
    ap.add_argument("--users", type=int, default=50_000)
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--ratings_per_user", type=int, default=50)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=4_000)
    ap.add_argument("--batch_size", type=int, default=8_192)
    ap.add_argument("--learning_rate", type=float, default=0.1)
    ap.add_argument("--l2", type=float, default=0.002)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--shards", type=int, default=0,
                    help="varstate's parts per table (default 0: the demo's, two per device; "
                    "1: one table each, as the peers hold them)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--atomic_scatters", action="store_true",
                    help="varstate demo --atomic_scatters: on a GPU, sparse SGD's duplicate ids "
                    "combined with atomics (the peers' default) instead of the sorted path")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--varstate", default="build/tools/cli/varstate")
    add_job_arguments(ap)
    ap.add_argument("--also_one_thread", action="store_true",
                    help="also run varstate with VARSTATE_CPU_THREADS=1 (\"varstate_1_thread\")")
    ap.add_argument("--out", default="")
    o = ap.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.compat.v1.disable_v2_behavior()  # graph mode, reference variables

    train, test = make_dataset(o.users, o.items, o.rank, o.ratings_per_user, o.noise, o.seed)
    model = tf_model(tf, o)
    result = {"config": {k: v for k, v in vars(o).items() if k not in ("out", "reps")},
              "tensorflow_version": tf.__version__, "cpu_count": os.cpu_count(),
              "loadavg_start": os.getloadavg(), "varstate_cpu_threads":
              os.environ.get("VARSTATE_CPU_THREADS", "default"), "varstate": [], "tensorflow": []}
    if o.also_one_thread:
        result["varstate_1_thread"] = []
    with tempfile.TemporaryDirectory(prefix="varstate-compare-demo-") as workdir:
        for rep in range(o.reps):  # interleaved: the machine's load hits both alike
            result["varstate"].append(run_varstate(o, workdir, rep))
            if o.also_one_thread:
                result["varstate_1_thread"].append(run_varstate(o, workdir, rep, threads=1))
            result["tensorflow"].append(run_tf(tf, model, train, test, o))
            print(f"rep {rep}: varstate {result['varstate'][-1]['steps_per_s']:.0f} steps/s, "
                  f"TensorFlow {result['tensorflow'][-1]['steps_per_s']:.0f} steps/s, load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
    result["loadavg_end"] = os.getloadavg()
    best = {k: max(r["steps_per_s"] for r in result[k]) for k in ("varstate", "tensorflow")}
    result["summary"] = {
        "varstate_steps_per_s": best["varstate"],
        "tensorflow_steps_per_s": best["tensorflow"],
        "ratio": best["varstate"] / best["tensorflow"],
        "varstate_test_rmse": result["varstate"][-1]["rmse_after"],
        "tensorflow_test_rmse": result["tensorflow"][-1]["rmse_after"],
    }
    if o.also_one_thread:
        one = max(r["steps_per_s"] for r in result["varstate_1_thread"])
        result["summary"]["varstate_1_thread_steps_per_s"] = one
        result["summary"]["ratio_1_thread"] = one / best["tensorflow"]
    text = json.dumps(result, indent=2)
    print(text)
    if o.out:
        with open(o.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
