#!/usr/bin/env python3
"""Checks the layering of the tree (docs/architecture.md, "Layers").

Fails (exit 1, one line per violation) when:
  * a module includes a module above it. Order, bottom up:
      base, cuda_emulation -> device, kernels -> runtime -> training -> checkpoint
      -> distributed -> tools, bench
    (cuda_emulation/ stands in for the CUDA runtime in VARSTATE_CUDA=EMULATE
    builds: it includes no other module)
    (proto/ holds schemas that depend on nothing: any module may include its
    generated headers). test/ and
    examples/ sit on top and may include anything. A public header counts
    as its module's: the module whose X.cc (or X.cu) implements
    varstate/X.h, that is includes it first; a public header no source
    implements (varstate/gradient.h, the umbrella varstate.h) counts as the
    highest module it includes. So runtime/ including "varstate/optimizer.h"
    (training's), or runtime's varstate/gather.h including it, is an upward
    include too;
  * a header named *_internal.h (or *_internal.cuh) is included from outside
    its folder: only files under that folder and the module's own tests
    (test/<module>/) may include it. A seam between modules has a plain name;
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
    "training": 3,
    "checkpoint": 4,
    "distributed": 5,
    "tools": 6,
    "bench": 6,
}
SIBLINGS_APART = {("device", "kernels"), ("kernels", "device")}
# What a public header may never pull in.
HEAVY = re.compile(r"^(cuda|cuda_runtime|cuda_runtime_api|cuda_fp16|cuda_bf16|cub/|thrust/|"
                   r"cublas|curand|Eigen/|unsupported/Eigen|google/protobuf|spdlog/|fmt/|"
                   r"leveldb/|mpi\.h)")


def included_module(target: str) -> str | None:
    head = target.split("/")[0]
    return head if head in RANK and "/" in target else None


def public_modules(public_dir: pathlib.Path) -> dict[str, str]:
    """The module of each public header ("varstate/X.h") that has one."""
    texts = {f"varstate/{p.name}": p.read_text(errors="replace") for p in public_dir.glob("*.h")}
    owner = {}
    for module in RANK:
        for pattern in ("*.cc", "*.cu"):
            for path in sorted((ROOT / module).rglob(pattern)):
                first = INCLUDE.search(path.read_text(errors="replace"))
                target = f"varstate/{path.stem}.h"
                if first and first.group(2) == target and target in texts:
                    owner.setdefault(target, module)

    def level(header: str, seen: frozenset) -> str | None:
        if header in owner:
            return owner[header]
        deps = [level(t, seen | {header}) for k, t in INCLUDE.findall(texts.get(header, ""))
                if k == '"' and t in texts and t not in seen]
        deps = [d for d in deps if d is not None]
        return max(deps, key=RANK.get) if deps else None

    return {h: m for h in texts if (m := level(h, frozenset())) is not None}


def upward(module: str, dep: str) -> bool:
    return RANK[dep] > RANK[module] or (module, dep) in SIBLINGS_APART


def internal_violations() -> list[str]:
    """Includes of a *_internal.h header from outside its folder."""
    errors = []
    roots = [ROOT / m for m in RANK] + [ROOT / "test", ROOT / "examples"]
    for root in roots:
        for pattern in SOURCES:
            for path in sorted(root.rglob(pattern)):
                rel = path.relative_to(ROOT)
                for kind, target in INCLUDE.findall(path.read_text(errors="replace")):
                    stem = target.rsplit("/", 1)[-1]
                    if kind != '"' or not re.search(r"_internal\.(h|cuh)$", stem):
                        continue
                    folder = target.rsplit("/", 1)[0] if "/" in target else str(rel.parent)
                    own_tests = "test/" + folder.split("/")[0]
                    where = str(rel.parent)
                    if not any(where == f or where.startswith(f + "/") for f in (folder, own_tests)):
                        errors.append(f'{rel}: includes "{target}", private to {folder}/ '
                                      "(an _internal header stays inside its folder; give a "
                                      "seam between modules a plain name)")
    return errors


def main() -> int:
    errors = []
    public_dir = ROOT / "include" / "varstate"
    public = {p.name for p in public_dir.glob("*.h")}
    public_module = public_modules(public_dir)

    def check(path: pathlib.Path, module: str) -> None:
        for kind, target in INCLUDE.findall(path.read_text(errors="replace")):
            if kind != '"':
                continue
            dep = included_module(target) or public_module.get(target)
            if dep is not None and upward(module, dep):
                errors.append(f"{path.relative_to(ROOT)}: module {module} includes "
                              f'"{target}" of module {dep}, which is above or beside it')

    for module in RANK:
        for pattern in SOURCES:
            for path in sorted((ROOT / module).rglob(pattern)):
                check(path, module)
    for path in sorted(public_dir.glob("*.h")):
        if f"varstate/{path.name}" in public_module:
            check(path, public_module[f"varstate/{path.name}"])

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
    errors += internal_violations()
    for line in errors:
        print(line)
    files = sum(1 for m in RANK for p in SOURCES for _ in (ROOT / m).rglob(p))
    if errors:
        print(f"layers: {len(errors)} violation(s)")
        return 1
    print(f"layers: {files} files in {len(RANK)} modules include only downward; "
          f"{len(public)} public headers include only public headers, "
          f"{len(public_module)} of them counted in a module; "
          "every _internal header is included only inside its folder")
    return 0


if __name__ == "__main__":
    sys.exit(main())
