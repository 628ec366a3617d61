#!/usr/bin/env python3
"""The main job against PyTorch: `varstate demo` and the same model in two
PyTorch programs, run interleaved on this machine.

The model of tools/cli/demo_command.cc (bench/compare_tf_demo.py has the
TensorFlow twin): user and item embedding tables initialized normal with
stddev 0.5 rank^-1/4, a mini-batch per step, loss = sum over the batch of
(u.v - rating)^2 / 2 + l2 (|u|^2 + |v|^2) / 2, plain SGD at the same
learning rate on the rows the batch touched. PyTorch has no partitioned
variables: each table is one tensor (`--shards 1` gives varstate one part per
table too; by default the demo splits each table in two parts per device). The two PyTorch programs:

  index_add    the fastest hand-written PyTorch: parameter tensors, the
               gradients written out (err v + l2 u, err u + l2 v) and
               applied with Tensor.index_add_(alpha=-learning_rate), no
               autograd;
  embedding    idiomatic PyTorch: torch.nn.Embedding(sparse=True) tables,
               the loss above, loss.backward() (sparse gradients) and
               torch.optim.SGD.step().

The ratings are the demo's own (compare_tf_demo.make_dataset: demo_data.cc's
generator redone in NumPy); the batch order is compare_tf_demo.py's (a NumPy
permutation per epoch, the same in every repetition and for both PyTorch
programs). The training ratings sit on the device as tensors before the
clock starts, and each epoch gathers them once in the new order, so a
step's batch is three slices: the strongest input pipeline PyTorch has here.
Initial values come from each library's own seeded generator, so the RMSEs
agree statistically, not bit for bit: each PyTorch run's final test RMSE
must be within --rmse_tolerance (relative, default 5%) of varstate's, or the
script names both values and exits 1 (after writing the JSON). The check is
for runs that converge (the default 4,000 steps: varstate 0.149, PyTorch
0.151; TensorFlow 0.148-0.154); a short run stops mid-descent, where other
initial values alone move the RMSE by more. The two PyTorch programs start
from the same values and see the same batches: their RMSEs differ by
rounding only ("pytorch_variants_rmse_gap"), a check of the hand-written
gradients against autograd's.

--device cpu: torch.set_num_threads(T) and VARSTATE_CPU_THREADS=T for each
T of --threads (default 2,1). --device cuda: PyTorch on cuda:0 and
`varstate demo --device gpu` (torch.cuda.synchronize() around the timed
loop). Each repetition runs varstate, then index_add, then embedding, for
every T in turn, so the machine's load hits all alike. Throughput counts the
training steps only (varstate's "train_seconds": without the checkpoint
save). PyTorch's multi-thread runs collapse on a machine busy with other
work (2 cores under a C++ build: 17 steps/s at 2 threads, 430 at 1); the
load average is in the JSON: quote figures from an idle machine only.
Prints one JSON object
(also written to --out; default
bench/results/demo-vs-pytorch-DEVICE-MACHINE.json) with the machine, the
load average, each run, and per thread count the best steps/s of each and
the ratios varstate / PyTorch of the same run.

  /usr/bin/python3 bench/compare_torch_demo.py \\
      --varstate build/tools/cli/varstate [--device cpu|cuda] [--threads 2,1]
      [--steps 4000] [--reps 3] [--shards N] [--rmse_tolerance 0.05] [--out FILE]
"""
import argparse
import json
import math
import os
import platform
import re
import sys
import tempfile
import time

import numpy as np

from compare_tf_demo import add_job_arguments, make_dataset, rmse, run_varstate

VARIANTS = ("index_add", "embedding")


def machine_name(torch, device):
    """`varstate bench`'s machine name: host, CPU count, GPU model."""
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "nogpu"
    name = f"{platform.node()}-{os.cpu_count()}cpu-{gpu}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def initial_tables(torch, o, dev):
    """Both tables, normal(0, 0.5 rank^-1/4) from a generator seeded by --seed."""
    g = torch.Generator().manual_seed(o.seed)
    stddev = 0.5 * o.rank**-0.25
    return [(torch.randn(rows, o.rank, generator=g) * stddev).to(dev)
            for rows in (o.users, o.items)]


class IndexAddModel:
    """Parameter tensors; the step's gradients by hand, applied with index_add_."""

    def __init__(self, torch, o, dev):
        self.torch, self.lr, self.l2 = torch, o.learning_rate, o.l2
        self.users, self.items = initial_tables(torch, o, dev)

    def step(self, uid, iid, rating):
        torch = self.torch
        u, v = self.users.index_select(0, uid), self.items.index_select(0, iid)
        err = (u * v).sum(1, keepdim=True) - rating.unsqueeze(1)  # [n, 1]
        grad_u = torch.addcmul(u * self.l2, err, v)  # err v + l2 u
        grad_v = torch.addcmul(v * self.l2, err, u)  # err u + l2 v
        self.users.index_add_(0, uid, grad_u, alpha=-self.lr)
        self.items.index_add_(0, iid, grad_v, alpha=-self.lr)

    def tables(self):
        return self.users, self.items


class EmbeddingModel:
    """nn.Embedding(sparse=True) tables, autograd, torch.optim.SGD."""

    def __init__(self, torch, o, dev):
        self.torch, self.l2 = torch, o.l2
        users, items = initial_tables(torch, o, dev)
        self.user_emb = torch.nn.Embedding.from_pretrained(users, freeze=False, sparse=True)
        self.item_emb = torch.nn.Embedding.from_pretrained(items, freeze=False, sparse=True)
        params = list(self.user_emb.parameters()) + list(self.item_emb.parameters())
        self.opt = torch.optim.SGD(params, lr=o.learning_rate)

    def step(self, uid, iid, rating):
        self.opt.zero_grad(set_to_none=True)
        u, v = self.user_emb(uid), self.item_emb(iid)
        err = (u * v).sum(1) - rating
        loss = 0.5 * err.square().sum() + 0.5 * self.l2 * (u.square().sum() + v.square().sum())
        loss.backward()
        self.opt.step()

    def tables(self):
        return self.user_emb.weight.detach(), self.item_emb.weight.detach()


def run_torch(torch, variant, train, test, o, dev, threads):
    torch.set_num_threads(threads)
    model = (IndexAddModel if variant == "index_add" else EmbeddingModel)(torch, o, dev)
    host = lambda: [t.cpu().numpy() for t in model.tables()]
    before = rmse(*host(), test)
    ids = [torch.from_numpy(a).to(dev) for a in train[:2]]
    values = torch.from_numpy(train[2]).to(dev)
    n, b = train[0].size, o.batch_size
    per_epoch = (n + b - 1) // b
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    grad_mode = torch.no_grad() if variant == "index_add" else torch.enable_grad()
    sync()
    t0 = time.perf_counter()
    with grad_mode:
        for step in range(o.steps):
            if step % per_epoch == 0:
                order = np.random.default_rng([o.seed, step // per_epoch]).permutation(n)
                order = torch.from_numpy(order).to(dev)
                uids, iids, ratings = ids[0][order], ids[1][order], values[order]
            at = slice((step % per_epoch) * b, (step % per_epoch + 1) * b)
            model.step(uids[at], iids[at], ratings[at])
    sync()
    seconds = time.perf_counter() - t0
    users, items = host()
    return {"threads": threads, "steps": o.steps, "train_seconds": seconds,
            "steps_per_s": o.steps / seconds, "rmse_before": before,
            "rmse_after": rmse(users, items, test), "rmse_train": rmse(users, items, train)}


def rmse_failures(result, tolerance):
    """One line per PyTorch run whose test RMSE is off varstate's same-T run."""
    failures = []
    for key, runs in result["runs"].items():
        if key.startswith("varstate"):
            continue
        variant, threads = key.split("/")
        where = threads.replace("_", " ").replace("1 threads", "1 thread")
        for rep, run in enumerate(runs):
            want = result["runs"][f"varstate/{threads}"][rep]["rmse_after"]
            got = run["rmse_after"]
            if want is None or not math.isfinite(want):
                failures.append(f"varstate ({where}, rep {rep}): test RMSE {want} is not finite")
            elif not math.isfinite(got) or abs(got - want) > tolerance * want:
                failures.append(
                    f"PyTorch {variant} ({where}, rep {rep}): test RMSE {got:.5f} vs varstate's "
                    f"{want:.5f}: off by {abs(got - want) / want:.2%}, "
                    f"tolerance {tolerance * 100:g}%")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--varstate", default="build/tools/cli/varstate")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="cpu, or cuda: PyTorch on cuda:0 and `varstate demo --device gpu`")
    ap.add_argument("--threads", default="2,1",
                    help="comma-separated thread counts: torch.set_num_threads and "
                    "VARSTATE_CPU_THREADS (default 2,1)")
    add_job_arguments(ap)
    ap.add_argument("--rmse_tolerance", type=float, default=0.05,
                    help="the most a PyTorch run's test RMSE may differ from varstate's, "
                    "relative (default 0.05)")
    ap.add_argument("--out", default="", help="default: bench/results/"
                    "demo-vs-pytorch-DEVICE-MACHINE.json; '-': nowhere")
    o = ap.parse_args()
    try:
        thread_counts = [int(t) for t in o.threads.split(",")]
        if not thread_counts or min(thread_counts) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--threads \"{o.threads}\" is not a comma-separated list of counts >= 1")
    if not os.access(o.varstate, os.X_OK):
        ap.error(f"--varstate \"{o.varstate}\" is not an executable (build the CLI first)")

    import torch
    if o.device == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    dev = torch.device("cuda:0" if o.device == "cuda" else "cpu")
    varstate_device = "gpu" if o.device == "cuda" else "cpu"
    torch.set_num_interop_threads(max(thread_counts))
    machine = machine_name(torch, o.device)
    if not o.out:
        o.out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                             f"demo-vs-pytorch-{o.device}-{machine}.json")

    train, test = make_dataset(o.users, o.items, o.rank, o.ratings_per_user, o.noise, o.seed)
    result = {"config": {k: v for k, v in vars(o).items() if k not in ("out", "reps")},
              "machine": machine, "cpu": cpu_model(), "cpu_count": os.cpu_count(),
              "gpu": torch.cuda.get_device_name(0) if o.device == "cuda" else None,
              "torch_version": torch.__version__, "numpy_version": np.__version__,
              "loadavg_start": os.getloadavg(), "loadavg_per_rep": [], "runs": {}}
    keys = [f"{name}/{t}_threads" for t in thread_counts for name in ("varstate",) + VARIANTS]
    result["runs"] = {k: [] for k in keys}
    with tempfile.TemporaryDirectory(prefix="varstate-compare-torch-demo-") as workdir:
        for rep in range(o.reps):  # interleaved: the machine's load hits all alike
            line = []
            for t in thread_counts:
                vs = run_varstate(o, workdir, rep, threads=t, device=varstate_device)
                result["runs"][f"varstate/{t}_threads"].append(vs)
                line.append(f"{t} threads: varstate {vs['steps_per_s']:.0f}")
                for variant in VARIANTS:
                    r = run_torch(torch, variant, train, test, o, dev, t)
                    result["runs"][f"{variant}/{t}_threads"].append(r)
                    line.append(f"{variant} {r['steps_per_s']:.0f}")
            result["loadavg_per_rep"].append(os.getloadavg())
            print(f"rep {rep} (steps/s): {', '.join(line)}; load {os.getloadavg()[0]:.1f}",
                  flush=True)
    result["loadavg_end"] = os.getloadavg()

    summary = {}
    for t in thread_counts:
        best = {name: max(r["steps_per_s"] for r in result["runs"][f"{name}/{t}_threads"])
                for name in ("varstate",) + VARIANTS}
        last = {name: result["runs"][f"{name}/{t}_threads"][-1]["rmse_after"]
                for name in ("varstate",) + VARIANTS}
        summary[f"{t}_threads"] = {
            **{f"{name}_steps_per_s": s for name, s in best.items()},
            **{f"ratio_vs_{v}": best["varstate"] / best[v] for v in VARIANTS},
            **{f"{name}_test_rmse": r for name, r in last.items()},
            # The same initial values and batches: only rounding tells them apart.
            "pytorch_variants_rmse_gap": abs(last["index_add"] - last["embedding"]),
        }
    result["summary"] = summary
    failures = rmse_failures(result, o.rmse_tolerance)
    result["rmse_check"] = {"tolerance": o.rmse_tolerance, "passed": not failures,
                            "failures": failures}
    text = json.dumps(result, indent=2)
    print(text)
    if o.out != "-":
        os.makedirs(os.path.dirname(os.path.abspath(o.out)), exist_ok=True)
        with open(o.out, "w") as f:
            f.write(text + "\n")
        print(f"wrote {o.out}", file=sys.stderr)
    if failures:
        for line in failures:
            print(f"compare_torch_demo: RMSE mismatch: {line}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
