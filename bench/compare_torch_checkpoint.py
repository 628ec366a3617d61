#!/usr/bin/env python3
"""Times torch.save / torch.load (and safetensors, when importable) on the
same float32 tensors bench_checkpoint saves: VARSTATE_CKPT_BENCH_GIB GiB
(default 1) in the mixed sizes 4M, 1M, 256K, 64K, 16K, 4K, 1K elements,
repeated. Files go to VARSTATE_BENCH_DIR (default /tmp/varstate_ckpt_bench).

Each save is followed by an fsync of the file and its folder (bench_checkpoint's saves are
durable); the time without it is reported too. Loads run after dropping the
page cache when permitted. Prints one JSON object (also written to --out).

Run with the interpreter that has torch (Debian: /usr/bin/python3).
"""
import argparse
import json
import os
import time

import torch

from checkpoint_files import drop_page_cache, fsync_files, mixed_sizes


def best(fn, reps):
    times = []
    for _ in range(reps):
        times.append(fn())
    return min(times), sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    gib = float(os.environ.get("VARSTATE_CKPT_BENCH_GIB", "1"))
    directory = os.environ.get("VARSTATE_BENCH_DIR", "/tmp/varstate_ckpt_bench")
    os.makedirs(directory, exist_ok=True)
    total = int(gib * (1 << 30))
    gen = torch.Generator().manual_seed(12345)
    tensors = {f"v{i}": torch.rand(n, generator=gen) for i, n in enumerate(mixed_sizes(total))}
    nbytes = sum(t.numel() * 4 for t in tensors.values())
    path = os.path.join(directory, "torch.pt")
    result = {"bytes": nbytes, "tensors": len(tensors), "torch_version": torch.__version__}

    def save(sync):
        def run():
            if os.path.exists(path):
                os.remove(path)
            os.sync()
            t0 = time.perf_counter()
            torch.save(tensors, path)
            if sync:
                fsync_files([path])
            return time.perf_counter() - t0
        return run

    for name, sync in (("torch_save_fsync", True), ("torch_save", False)):
        b, m = best(save(sync), args.reps)
        result[name] = {"best_s": b, "mean_s": m, "GBps": nbytes / b / 1e9}

    def load():
        dropped = drop_page_cache()
        t0 = time.perf_counter()
        torch.load(path)
        result["cache_dropped"] = dropped
        return time.perf_counter() - t0

    b, m = best(load, args.reps)
    result["torch_load"] = {"best_s": b, "mean_s": m, "GBps": nbytes / b / 1e9}
    os.remove(path)

    try:
        from safetensors.torch import load_file, save_file
    except ImportError:
        result["safetensors"] = "not importable"
    else:
        spath = os.path.join(directory, "model.safetensors")

        def st_save():
            t0 = time.perf_counter()
            save_file(tensors, spath)
            fsync_files([spath])
            return time.perf_counter() - t0

        def st_load():
            drop_page_cache()
            t0 = time.perf_counter()
            loaded = load_file(spath)
            for t in loaded.values():  # touch the pages: mmap loads are lazy
                t.sum()
            return time.perf_counter() - t0

        b, m = best(st_save, args.reps)
        result["safetensors_save_fsync"] = {"best_s": b, "mean_s": m, "GBps": nbytes / b / 1e9}
        b, m = best(st_load, args.reps)
        result["safetensors_load"] = {"best_s": b, "mean_s": m, "GBps": nbytes / b / 1e9}
        os.remove(spath)

    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
