#!/usr/bin/env python3
"""Checks the layering of the tree (DESIGN.md, "Layers and folders").

Fails (exit 1, one line per violation) when:
  * a module includes a module above it. Order, bottom up:
      base, cuda_emulation -> device, kernels -> runtime -> checkpoint -> distributed -> tools, bench
    (cuda_emulation/ stands in for the CUDA runtime in VARSTATE_CUDA=EMULATE
    builds: it includes no other module)
    (proto/ holds schemas that depend on nothing: any module may include its
    generated headers). test/ and
    examples/ sit on top and may include anything;
  * an installed header (include/varstate/*.h) includes a private header
    (anything but <standard library> and "varstate/*.h");
  * an installed header pulls in CUDA, Eigen, protobuf or spdlog, directly or
    through another header;
Usage: tools/check_layers.py [ROOT]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
SOURCES = ("*.h", "*.cc", "*.cu", "*.cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

# Rank of each module: a file may include modules of lower or equal rank only.
# device and kernels share a floor and must not include each other.
RANK = {
    "base": 0,
    "proto": 0,
    "cuda_emulation": 0,
    "device": 1,
    "kernels": 1,
    "runtime": 2,
    "checkpoint": 3,
    "distributed": 4,
    "tools": 5,
    "bench": 5,
}
SIBLINGS_APART = {("device", "kernels"), ("kernels", "device")}
# What a public header may never pull in.
HEAVY = re.compile(r"^(cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cuda_bf16|cub/|thrust/|"
                   r"cublas|curand|Eigen/|unsupported/Eigen|google/protobuf|spdlog/|fmt/|"
                   r"leveldb/|mpi\.h)")


def module_of(path: pathlib.Path) -> str | None:
    parts = path.relative_to(ROOT).parts
    return parts[0] if parts[0] in RANK else None


def included_module(target: str) -> str | None:
    head = target.split("/")[0]
    return head if head in RANK and "/" in target else None


def main() -> int:
    errors = []
    public = {p.name for p in (ROOT / "include" / "varstate").glob("*.h")}

    for module in RANK:
        for pattern in SOURCES:
            for path in sorted((ROOT / module).rglob(pattern)):
                text = path.read_text(errors="replace")
                for kind, target in INCLUDE.findall(text):
                    if kind != '"':
                        continue
                    dep = included_module(target)
                    if dep is None:
                        continue
                    if RANK[dep] > RANK[module] or (module, dep) in SIBLINGS_APART:
                        errors.append(f"{path.relative_to(ROOT)}: module {module} includes "
                                      f'"{target}" of module {dep}, which is above or beside it')

    # Installed headers: only the standard library and other installed headers.
    for path in sorted((ROOT / "include" / "varstate").glob("*.h")):
        text = path.read_text(errors="replace")
        for kind, target in INCLUDE.findall(text):
            rel = path.relative_to(ROOT)
            if HEAVY.match(target):
                errors.append(f"{rel}: public header includes {target} (CUDA, Eigen, protobuf, "
                              "spdlog and other private dependencies stay out of the API)")
            elif kind == '"':
                if not target.startswith("varstate/") or target[len("varstate/"):] not in public:
                    errors.append(f'{rel}: public header includes "{target}", which is not '
                                  "an installed header")
            elif "/" in target or target.endswith(".h") and target not in ("stddef.h", "stdint.h"):
                errors.append(f"{rel}: public header includes <{target}>, not a standard header")
    for line in errors:
        print(line)
    files = sum(1 for m in RANK for p in SOURCES for _ in (ROOT / m).rglob(p))
    if errors:
        print(f"layers: {len(errors)} violation(s)")
        return 1
    print(f"layers: {files} files in {len(RANK)} modules include only downward; "
          f"{len(public)} public headers include only public headers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
