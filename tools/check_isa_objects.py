#!/usr/bin/env python3
"""Checks that the objects built with wider instruction sets keep to themselves.

kernels/cpu/matmul_rows_avx2.cc and matmul_rows_avx512.cc are compiled with
-mavx2 / -mavx512f (and FMA), matmul_amx.cc with -mamx-tile -mamx-bf16, and
the library calls them only on a CPU that has those sets. Any inline function they instantiate is a weak symbol, and
the linker keeps one copy of each name for the whole library: if the wide
copy of a function the baseline code also uses were kept, a CPU without
AVX-512 would fault in code that never asked for it. So those files rename
Eigen's namespace (matmul_rows_impl.h) or use no inline template of another
namespace (matmul_amx.cc), and this check fails on any global symbol they
define whose name involves neither the renamed namespace nor their own (a
std:: helper the compiler chose not to inline, say).

Usage: tools/check_isa_objects.py BUILD_DIR
Exit 0 when both objects pass (or on a machine that is not x86-64, where
they are not built), 1 with one line per stray symbol otherwise.
"""
import pathlib
import platform
import subprocess
import sys

OBJECTS = ["matmul_rows_avx2.cc.o", "matmul_rows_avx512.cc.o", "matmul_amx.cc.o"]
# A global symbol may be defined when its name involves one of these.
ALLOWED = ["varstate_eigen_avx2", "varstate_eigen_avx512",
           "varstate::kernels::cpu::matmul_avx2::", "varstate::kernels::cpu::matmul_avx512::",
           "varstate::kernels::cpu::matmul_amx::",
           "DW.ref.__gxx_personality_v0"]


def main():
    if len(sys.argv) != 2:
        print("usage: tools/check_isa_objects.py BUILD_DIR", file=sys.stderr)
        return 2
    build = pathlib.Path(sys.argv[1])
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"check_isa_objects: {platform.machine()}: no per-ISA objects are built")
        return 0
    failures = []
    for name in OBJECTS:
        found = sorted(build.glob(f"CMakeFiles/varstate.dir/**/{name}"))
        if not found and name == "matmul_amx.cc.o":
            continue  # a compiler without the AMX flags builds no tile kernel
        if len(found) != 1:
            failures.append(f"{build}: expected one {name}, found {len(found)}")
            continue
        out = subprocess.run(["nm", "-C", "--defined-only", str(found[0])], check=True,
                             capture_output=True, text=True).stdout
        checked = 0
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) != 3 or not parts[1].isupper() and parts[1] not in "uvw":
                continue  # local symbols cannot clash
            checked += 1
            if not any(a in parts[2] for a in ALLOWED):
                failures.append(f"{found[0].name}: global symbol outside the renamed "
                                f"namespaces ({parts[1]}): {parts[2]}")
        if checked == 0:
            failures.append(f"{found[0].name}: defines no global symbol (is it still the GEMM?)")
    for f in failures:
        print(f"check_isa_objects: {f}")
    if not failures:
        print("check_isa_objects: per-ISA objects define no stray global symbol")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
