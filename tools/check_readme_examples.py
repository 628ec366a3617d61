#!/usr/bin/env python3
"""Checks that every ```cpp block of README.md and docs/*.md appears verbatim in
one of the examples/readme/*.cc programs (which CI builds against the installed package
and runs), so the README's code compiles and does what it says.

Lines are compared without their leading and trailing whitespace (an example
may indent the snippet); the snippet's lines must be consecutive in the file.
Exit code 1 names each block that no example contains."""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent


def lines(text):
    return [line.strip() for line in text.splitlines()]


pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
blocks = [(page.relative_to(root), block) for page in pages
          for block in re.findall(r"^```cpp\n(.*?)^```", page.read_text(), flags=re.S | re.M)]
examples = {p: lines(p.read_text()) for p in sorted((root / "examples" / "readme").glob("*.cc"))}


def contains(haystack, needle):
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


missing = 0
for page, block in blocks:
    snippet = lines(block)
    if not any(contains(text, snippet) for text in examples.values()):
        missing += 1
        print(f"{page}: this cpp block is in no examples/readme/*.cc program:\n{block}")
if not blocks:
    print("README.md has no ```cpp blocks")
    sys.exit(1)
print(f"README and docs/ cpp blocks: {len(blocks) - missing} of {len(blocks)} in examples/readme")
sys.exit(1 if missing else 0)
