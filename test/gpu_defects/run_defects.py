#!/usr/bin/env python3
"""Proof that emulated GPUs catch real GPU bugs: applies each defect of the
kill table (kill_table.py) to a scratch copy of the tree, one at a time,
rebuilds the test it names in an emulated-GPU build (VARSTATE_CUDA=EMULATE),
and runs it. A defect is killed when the test fails (a failed check, an
error, a crash, a sanitizer report). Every test first runs on the clean copy
and must pass there, so a kill is the defect's doing.

  test/gpu_defects/run_defects.py [--asan] [--work DIR] [--only NAME ...]

--asan builds with AddressSanitizer + UndefinedBehaviorSanitizer (as CI's
emulated configuration); without it the defects marked needs_asan are
reported as not checked. The scratch copy and its build stay in --work
(default /tmp/varstate-defects) so that a rerun rebuilds only what changed.
Exits 1 if a defect survives or a clean run fails. Writes the table as JSON
to --json when given.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from kill_table import DEFECTS  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def sync_tree(src: pathlib.Path, dst: pathlib.Path) -> None:
    """Copies the tracked (and untracked, not ignored) files of src to dst,
    rewriting only files whose bytes differ so that builds stay incremental."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=src, check=True,
                           capture_output=True, text=True).stdout.split("\n")
    for rel in filter(None, files):
        s, d = src / rel, dst / rel
        if not s.is_file():
            continue
        data = s.read_bytes()
        if d.is_file() and d.read_bytes() == data:
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        d.write_bytes(data)
        shutil.copymode(s, d)


def run(cmd, **kw):
    return subprocess.run(cmd, **kw)


def build(build_dir: pathlib.Path, targets) -> None:
    r = run(["cmake", "--build", str(build_dir), "--target", *sorted(set(targets))],
            capture_output=True, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout[-4000:] + r.stderr[-4000:])
        raise SystemExit("build failed")


def run_test(build_dir: pathlib.Path, d: dict, timeout: int) -> tuple[int, str]:
    env = dict(os.environ)
    env.setdefault("VARSTATE_EMULATED_GPUS", "2")
    env.update(d.get("env", {}))
    cmd = [str(build_dir / "test" / d["test"])]
    if d["filter"]:
        cmd.append(d["filter"])
    try:
        r = run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        out = r.stdout + r.stderr
        return r.returncode, out
    except subprocess.TimeoutExpired:
        return -1, "timed out"


def first_failure_line(out: str) -> str:
    for line in out.splitlines():
        if any(k in line for k in ("FAILED", "ERROR: AddressSanitizer", "device fault",
                                   "Segmentation", "SEGV", "terminate called")):
            return line.strip()[:160]
    return out.strip().splitlines()[-1][:160] if out.strip() else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--asan", action="store_true")
    ap.add_argument("--work", default="/tmp/varstate-defects")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--json")
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    src, build_dir = work / "src", work / ("build-asan" if args.asan else "build")
    src.mkdir(parents=True, exist_ok=True)
    sync_tree(ROOT, src)
    defects = [d for d in DEFECTS if not args.only or d["name"] in args.only]
    for d in defects:  # each defect's text must be where the table says, once
        text = (src / d["file"]).read_text()
        if text.count(d["old"]) != 1:
            raise SystemExit(f"{d['name']}: the text to replace occurs {text.count(d['old'])} "
                             f"times in {d['file']}, not once: update kill_table.py")
    if not (build_dir / "CMakeCache.txt").exists():
        cfg = ["cmake", "-S", str(src), "-B", str(build_dir), "-G", "Ninja",
               "-DVARSTATE_CUDA=EMULATE", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
               "-DVARSTATE_BUILD_BENCH=OFF", "-DVARSTATE_BUILD_TOOLS=OFF",
               "-DVARSTATE_BUILD_INTEROP_TESTS=OFF"]
        if args.asan:
            cfg.append("-DVARSTATE_SANITIZE=ON")
        run(cfg, check=True, capture_output=True)
    os.environ.setdefault("CCACHE_BASEDIR", str(src))
    os.environ.setdefault("CCACHE_NOHASHDIR", "true")
    if args.asan:
        os.environ.setdefault("ASAN_OPTIONS",
                              "detect_leaks=0:abort_on_error=1:allocator_may_return_null=1")
        os.environ.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")

    print(f"building the clean copy in {build_dir} ...", flush=True)
    build(build_dir, [d["test"] for d in defects])
    clean_failures = []
    for key in sorted({(d["test"], d["filter"], tuple(sorted(d.get("env", {}).items())))
                       for d in defects}):
        probe = {"test": key[0], "filter": key[1], "env": dict(key[2])}
        code, out = run_test(build_dir, probe, args.timeout)
        print(f"clean  {key[0]} {key[1]!r}: {'pass' if code == 0 else 'FAIL'}", flush=True)
        if code != 0:
            clean_failures.append((key, first_failure_line(out)))

    results = []
    for d in defects:
        path = src / d["file"]
        original = path.read_text()
        started = time.time()
        if d.get("needs_asan") and not args.asan:
            results.append(dict(name=d["name"], kind=d["kind"], test=d["test"], filter=d["filter"],
                                outcome="not checked (needs --asan)", evidence=""))
            print(f"skip   {d['name']}: needs --asan", flush=True)
            continue
        try:
            path.write_text(original.replace(d["old"], d["new"], 1))
            build(build_dir, [d["test"]])
            code, out = run_test(build_dir, d, args.timeout)
        finally:
            path.write_text(original)
        outcome = "killed" if code != 0 else "SURVIVED"
        evidence = first_failure_line(out) if code != 0 else ""
        results.append(dict(name=d["name"], kind=d["kind"], test=d["test"], filter=d["filter"],
                            env=d.get("env", {}), outcome=outcome, evidence=evidence,
                            seconds=round(time.time() - started, 1)))
        print(f"{outcome:7s}{d['name']}: {evidence}", flush=True)
    build(build_dir, [d["test"] for d in defects])  # back to the clean build

    killed = sum(r["outcome"] == "killed" for r in results)
    print(f"\n{killed} of {len(results)} defects killed; "
          f"{len(clean_failures)} clean run(s) failed", flush=True)
    for key, line in clean_failures:
        print(f"  clean failure: {key[0]} {key[1]!r}: {line}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"asan": args.asan, "results": results,
             "clean_failures": [[k[0], k[1], line] for k, line in clean_failures]}, indent=1) + "\n")
    survived = [r for r in results if r["outcome"] == "SURVIVED"]
    return 1 if survived or clean_failures else 0


if __name__ == "__main__":
    sys.exit(main())
