#!/usr/bin/env python3
"""Checks that the CPU kernels' software prefetches survived compilation.

A prefetch changes no result, so no test can see it go missing, and GCC
deletes one silently when it sits in a helper its pure-const pass calls
pure (kernels/cpu/prefetch.h). Sparse training's row loop ran without a
prefetch for weeks because of that, and so did bench_sparse_limit's limit
pass. This check disassembles the built binaries (objdump) and fails when
a function that prefetches in the source has no prefetch instruction.

Each rule below names a function by a pattern on its demangled name; every
function matching it (each instantiation, and each instruction-set build)
must prefetch, and at least `min_matches` functions must match, so that a
rename cannot turn a rule into a check of nothing.

Usage: tools/check_prefetch.py BUILD_DIR
Exit 0 when every rule holds, 1 with one line per failure otherwise.
"""
import pathlib
import re
import subprocess
import sys

# (binary relative to the build folder, pattern, min_matches, what it is)
RULES = [
    ("libvarstate.so", r"::SparseUpdate<.*>::run\(", 30,
     "sparse training's row loop: the distinct rows ahead"),
    ("libvarstate.so", r"IsaVariants<.*::SparseUpdate, .*>::avx(512|2)<", 60,
     "the same loop, built per instruction set"),
    ("libvarstate.so", r"IsaVariants<.*::AdamRows, .*>::avx(512|2)<", 8,
     "compat.v1 sparse Adam's pass over the table: the gradient rows of the batch's rows ahead"),
    ("libvarstate.so", r"call_avx(512|2)_f16c<.*::AdamRows<.*>::run\(", 2,
     "the same pass for float16, built for F16C"),
    ("libvarstate.so", r"DistinctRows<.*>::number_and_sum<", 8,
     "sparse training's numbering pass: the entries of ids ahead"),
    ("libvarstate.so", r"DistinctRows<.*>::(sum_listed|summing_pass)\(", 8,
     "sparse training's summing pass: the rows of sums (and gradient rows) ahead"),
    ("libvarstate.so", r"scatter_internal::apply_resolved<", 20,
     "the combining scatters: the rows ahead"),
    ("libvarstate.so", r"::copy_rows<.*gather_rows<", 2,
     "gather: the source rows ahead"),
    ("libvarstate.so", r"::copy_rows_ring<.*gather_rows_parts<", 2,
     "a partitioned table's gather: the source rows ahead"),
    ("libvarstate.so", r"HashIndex::(find|insert)\(long const\*", 2,
     "the CPU hash index's batch find and insert: the entries ahead"),
    ("bench/bench_sparse_limit", r"Limit::pass<.*\{lambda\(long, long\)#1\}::operator\(\)", 12,
     "the touch-the-rows limit's pass: the rows ahead"),
]

FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
PREFETCH = re.compile(r"\bprefetch(nta|t0|t1|t2|w|wt1)?\b")


def prefetches_by_function(binary):
    """{demangled function name: prefetch instructions in it}."""
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", str(binary)],
                         check=True, capture_output=True, text=True).stdout
    counts = {}
    name = None
    for line in out.splitlines():
        m = FUNCTION.match(line)
        if m:
            name = m.group(1)
            # A PLT stub or a function's outlined cold part is not the
            # function.
            if name.endswith("@plt") or "[clone .cold" in name:
                name = None
            else:
                counts.setdefault(name, 0)
        elif name is not None and PREFETCH.search(line):
            counts[name] += 1
    return counts


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    build = pathlib.Path(sys.argv[1])
    failures = []
    disassembled = {}
    for rel, pattern, min_matches, what in RULES:
        binary = build / rel
        if not binary.exists():
            failures.append(f"{binary}: not built ({what})")
            continue
        if rel not in disassembled:
            disassembled[rel] = prefetches_by_function(binary)
        regex = re.compile(pattern)
        matched = {n: c for n, c in disassembled[rel].items() if regex.search(n)}
        if len(matched) < min_matches:
            failures.append(f"{rel}: {len(matched)} functions match /{pattern}/, expected at least "
                            f"{min_matches} ({what})")
        for n, c in sorted(matched.items()):
            if c == 0:
                failures.append(f"{rel}: no prefetch instruction in {n[:160]} ({what})")
    for f in failures:
        print(f)
    if not failures:
        print(f"check_prefetch: {len(RULES)} rules hold")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
