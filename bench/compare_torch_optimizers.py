#!/usr/bin/env python3
"""The dense training ops against PyTorch's optimizers, interleaved.

Each case of bench_dense_training (bench/dense_training_bench.cc: one
tensor of 64M elements, float32 or bfloat16) runs against the PyTorch
optimizer that moves the same bytes:

  gradient_descent   torch.optim.SGD(fused=True)
  momentum           torch.optim.SGD(momentum=0.9, fused=True)
  adagrad            torch.optim.Adagrad(fused=True)
  adam               torch.optim.Adam(fused=True)
  rms_prop           torch.optim.RMSprop(momentum=0.9)   (no fused CPU form)
  centered_rms_prop  torch.optim.RMSprop(momentum=0.9, centered=True)
  ftrl               -   (PyTorch has none: the limit alone)
  moving_average     avg.lerp_(param, 1 - 0.999)   (PyTorch's one-kernel EMA
                     update, as torch.optim.swa_utils and timm use it)

A case's round runs bench_dense_training for it (--reps steps, each paired
with the limit: a pass that moves the op's bytes and computes nothing),
then --reps PyTorch steps on a tensor of the same size, after an untimed
one; --rounds rounds alternate, so the machine's load hits both alike.
Figures are medians. torch.set_num_threads(T) and VARSTATE_CPU_THREADS=T
for the --threads T (default: the CPU count). Prints a line per case and
writes JSON (--out; default
bench/results/dense-training-vs-pytorch-MACHINE.json) with the machine,
the load averages, and per case varstate's, PyTorch's and the limit's
milliseconds, varstate / PyTorch (steps per second) and each one's
fraction of the limit, and bench_dense_training's compute floor (the op's
arithmetic on cache-resident tensors, scaled to the full size) with
varstate's fraction of the larger of the two bounds.

  python bench/compare_torch_optimizers.py --ours-bin build/bench/bench_dense_training \\
      [--only adam/float32,...] [--threads 2] [--reps 5] [--rounds 3] [--quick] [--out F]

Run with a PyTorch that has the fused CPU optimizers (2.4 or later), e.g.
from a virtual environment of its own:

  python3 -m venv ~/.cache/varstate/venv-torch
  ~/.cache/varstate/venv-torch/bin/pip install torch numpy
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from compare_torch_demo import cpu_model, machine_name  # noqa: E402

OPS = ("gradient_descent", "momentum", "adagrad", "adam", "rms_prop", "centered_rms_prop",
       "ftrl", "moving_average")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def torch_optimizer(op, param):
    """PyTorch's optimizer for `op` over [param], or None (Ftrl)."""
    o = torch.optim
    if op == "gradient_descent":
        return o.SGD([param], lr=0.01, fused=True)
    if op == "momentum":
        return o.SGD([param], lr=0.01, momentum=0.9, fused=True)
    if op == "adagrad":
        return o.Adagrad([param], lr=0.01, fused=True)
    if op == "adam":
        return o.Adam([param], lr=0.001, fused=True)
    if op == "rms_prop":
        return o.RMSprop([param], lr=0.001, momentum=0.9)
    if op == "centered_rms_prop":
        return o.RMSprop([param], lr=0.001, momentum=0.9, centered=True)
    return None


def torch_steps(op, dtype, n, reps):
    """Seconds of `reps` PyTorch steps (after an untimed one), or None."""
    param = torch.full((n,), 0.5, dtype=dtype)
    param.grad = ((torch.rand(n, dtype=torch.float32) - 0.5) * 0.02).to(dtype)
    if op == "moving_average":
        average = param.clone()
        param.add_(param.grad)  # the average now lags the variable

        class Average:  # the update as an optimizer step
            @staticmethod
            def step():
                average.lerp_(param, 1 - 0.999)

        opt = Average()
    else:
        opt = torch_optimizer(op, param)
    if opt is None:
        return None
    opt.step()  # untimed: creates the state (first touches)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def ours(bin_path, label, reps, quick, threads):
    """bench_dense_training's result for one case (a dict of its JSON)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [bin_path, "--only", label, "--reps", str(reps), "--out", out]
        if quick:
            cmd.append("--quick")
        env = dict(os.environ, VARSTATE_CPU_THREADS=str(threads))
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["results"][0]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ours-bin", required=True)
    p.add_argument("--only", default="", help="comma-separated OP/DTYPE cases (default: all)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="16M elements instead of 64M")
    p.add_argument("--out", default="")
    o = p.parse_args()
    torch.set_num_threads(o.threads)
    n = (16 if o.quick else 64) << 20
    cases = [f"{op}/{d}" for d in DTYPES for op in OPS]
    if o.only:
        wanted = o.only.split(",")
        unknown = [c for c in wanted if c not in cases]
        if unknown:
            sys.exit(f"compare_torch_optimizers: no case {', '.join(unknown)} (cases: {cases})")
        cases = [c for c in cases if c in wanted]
    machine = machine_name(torch, "cpu")
    result = {"context": {"machine": machine, "cpu": cpu_model(), "cpu_count": os.cpu_count(),
                          "threads": o.threads, "torch": torch.__version__,
                          "elements": n, "reps": o.reps, "rounds": o.rounds,
                          "loadavg_start": os.getloadavg()},
              "results": []}
    for label in cases:
        op, dtype = label.split("/")
        ours_ms, limit_ms, floor_ms, torch_ms = [], [], [], []
        for _ in range(o.rounds):
            r = ours(o.ours_bin, label, o.reps, o.quick, o.threads)
            ours_ms.append(r["ms"])
            limit_ms.append(r["limit_ms"])
            floor_ms.append(r["compute_floor_ms"])
            t = torch_steps(op, DTYPES[dtype], n, o.reps)
            if t is not None:
                torch_ms.append(statistics.median(t) * 1e3)
        entry = {"case": label, "bytes": r["bytes"],
                 "ours_ms": statistics.median(ours_ms), "limit_ms": statistics.median(limit_ms),
                 "compute_floor_ms": statistics.median(floor_ms),
                 "ours_ms_per_round": ours_ms, "limit_ms_per_round": limit_ms}
        entry["ours_ratio_to_limit"] = entry["limit_ms"] / entry["ours_ms"]
        entry["ours_ratio_to_bound"] = (max(entry["limit_ms"], entry["compute_floor_ms"])
                                        / entry["ours_ms"])
        line = (f"{label:28s} varstate {entry['ours_ms']:8.2f} ms  limit {entry['limit_ms']:8.2f}"
                f" ms ({entry['ours_ratio_to_limit']:.3f} of it), compute floor"
                f" {entry['compute_floor_ms']:7.2f} ms")
        if torch_ms:
            entry["torch_ms"] = statistics.median(torch_ms)
            entry["torch_ms_per_round"] = torch_ms
            entry["torch_ratio_to_limit"] = entry["limit_ms"] / entry["torch_ms"]
            entry["ours_over_torch"] = entry["torch_ms"] / entry["ours_ms"]
            line += (f"  PyTorch {entry['torch_ms']:8.2f} ms ({entry['torch_ratio_to_limit']:.3f})"
                     f"  varstate/PyTorch {entry['ours_over_torch']:.2f}x")
        print(line, flush=True)
        result["results"].append(entry)
    result["context"]["loadavg_end"] = os.getloadavg()
    out = o.out or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                f"dense-training-vs-pytorch-{machine}.json")
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
