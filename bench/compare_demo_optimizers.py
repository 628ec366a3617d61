#!/usr/bin/env python3
"""The main job's optimizers compared: `varstate demo --optimizer X` for
each optimizer and learning rate, the test RMSE at a few step counts and
the training steps/s.

Each configuration trains in segments (to the first step count, then
--resume to the next, ...): a resumed run continues bit-identically, so the
RMSE after each segment is the RMSE of one run at that step. Steps/s counts
the training steps only ("train_seconds" of --json: without data, restore,
saves and evaluation), over all segments. Prints one JSON object (also
written to --out) with every run and, per size, the best learning rate of
each optimizer (lowest test RMSE at the last step count).

  python3 bench/compare_demo_optimizers.py --varstate build/tools/cli/varstate \\
      [--steps 500,1000,2000,4000] [--sizes default,large] [--out FILE]
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

# Learning rates tried per optimizer: around TensorFlow's usual values,
# scaled for a batch of 8,192 ratings.
LEARNING_RATES = {
    "sgd": [0.05, 0.1, 0.2],
    "momentum": [0.01, 0.02, 0.05],
    "adagrad": [0.1, 0.2, 0.5],
    "adam": [0.003, 0.01, 0.03],
    "rowwise-adagrad": [0.1, 0.2, 0.5],
}

SIZES = {
    "default": [],  # 50,000 users x 10,000 items, rank 16, 50 ratings per user
    "large": ["--users", "200000", "--items", "40000"],
}


def run_segments(cli, size_flags, optimizer, lr, steps, workdir):
    """RMSE after each step count and the training steps/s of the whole run."""
    ckpt = os.path.join(workdir, f"{optimizer}-{lr}")
    out = os.path.join(workdir, "run.json")
    points, train_seconds, trained = [], 0.0, 0
    for i, n in enumerate(steps):
        cmd = [cli, "demo", *size_flags, "--optimizer", optimizer, "--learning_rate", str(lr),
               "--steps", str(n), "--checkpoint_dir", ckpt, "--full_checkpoints",
               "--save_every", str(max(steps)), "--max_to_keep", "1", "--json", out]
        if i > 0:
            cmd.append("--resume")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:  # a diverged run's RMSE is null: NaN here
            r = {k: float("nan") if v is None else v for k, v in json.load(f).items()}
        if i == 0:
            points.append({"step": 0, "test_rmse": r["rmse_before"]})
        points.append({"step": n, "test_rmse": r["rmse_after"], "train_rmse": r["rmse_train"]})
        train_seconds += r["train_seconds"]
        trained += r["steps"]
    return {"optimizer": optimizer, "learning_rate": lr, "rmse": points,
            "steps_per_s": trained / train_seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--varstate", required=True)
    ap.add_argument("--steps", default="500,1000,2000,4000")
    ap.add_argument("--sizes", default="default,large")
    ap.add_argument("--optimizers", default=",".join(LEARNING_RATES))
    ap.add_argument("--best_only_for", default="large",
                    help="sizes that run only each optimizer's best learning rate of 'default'")
    ap.add_argument("--out")
    a = ap.parse_args()
    steps = [int(s) for s in a.steps.split(",")]
    result = {"steps": steps, "cpu_threads": os.environ.get("VARSTATE_CPU_THREADS", "default"),
              "nproc": os.cpu_count(), "loadavg_start": os.getloadavg(), "sizes": {}}
    best = {}
    with tempfile.TemporaryDirectory() as workdir:
        for size in a.sizes.split(","):
            runs = []
            for opt in a.optimizers.split(","):
                lrs = LEARNING_RATES[opt]
                if size in a.best_only_for.split(",") and opt in best:
                    lrs = [best[opt]]
                for lr in lrs:
                    t0 = time.time()
                    runs.append(run_segments(a.varstate, SIZES[size], opt, lr, steps, workdir))
                    print(f"{size} {opt} lr {lr}: RMSE "
                          f"{[round(p['test_rmse'], 4) for p in runs[-1]['rmse']]}, "
                          f"{runs[-1]['steps_per_s']:.0f} steps/s ({time.time() - t0:.0f} s)",
                          flush=True)
            summary = {}
            for r in runs:
                final = r["rmse"][-1]["test_rmse"]
                s = summary.get(r["optimizer"])
                if final == final and (s is None or final < s["rmse"][-1]["test_rmse"]):
                    summary[r["optimizer"]] = r
            if size == "default":
                best = {opt: r["learning_rate"] for opt, r in summary.items()}
            result["sizes"][size] = {"flags": SIZES[size], "runs": runs,
                                     "best": {k: v["learning_rate"] for k, v in summary.items()}}
    result["loadavg_end"] = os.getloadavg()
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
