#!/usr/bin/env python3
"""Fails when a function in server/core is longer than the limit (80 lines).

The core is where every front's requests are validated and planned; its
functions stay short enough to read whole. A function is counted from the
line at column 0 that begins its definition to its closing brace at column
0 (clang-format's layout).

Usage: function_length_test.py SOURCE_DIR [--limit N]
"""
import argparse
import glob
import os
import sys

SKIP = ("namespace", "}", "#", "//", "struct", "class", "enum", "using",
        "extern", "template", "constexpr", "inline constexpr",
        "static_assert")


def long_functions(path, limit):
    with open(path) as f:
        lines = f.read().split("\n")
    found = []
    start = None
    for i, line in enumerate(lines):
        if start is None:
            if not line or line[0].isspace() or line.startswith(SKIP):
                continue
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith(("{", ";")):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{"):
                start = i
        elif line == "}":
            if i - start + 1 > limit:
                found.append((start + 1, i - start + 1, lines[start].strip()))
            start = None
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("source_dir")
    parser.add_argument("--limit", type=int, default=80)
    args = parser.parse_args()
    files = sorted(glob.glob(os.path.join(args.source_dir, "server/core/*.cc")))
    if len(files) < 5:
        print(f"expected the core's sources under {args.source_dir}")
        return 1
    failed = False
    for path in files:
        for line, length, head in long_functions(path, args.limit):
            print(f"{os.path.relpath(path, args.source_dir)}:{line}: "
                  f"{length} lines (limit {args.limit}): {head}")
            failed = True
    if not failed:
        print(f"core functions: every one of {len(files)} files within "
              f"{args.limit} lines")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
