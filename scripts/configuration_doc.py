#!/usr/bin/env python3
"""Writes (or with --check, compares) the generated part of
docs/configuration.md: the tables `encoder-server --help-markdown` prints
from the server's own option table, between the page's BEGIN and END
markers.

    python3 scripts/configuration_doc.py --binary build/encoder-server
    cmake --build build --target docs-configuration   # the same

--check exits 1 with a diff when the committed page differs from what the
binary prints, naming the command that regenerates it.
"""
import argparse
import difflib
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN = "<!-- BEGIN encoder-server --help-markdown -->"
END = "<!-- END encoder-server --help-markdown -->"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--page", default=str(ROOT / "docs" /
                                              "configuration.md"))
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    out = subprocess.run([args.binary, "--help-markdown"], check=False,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{args.binary} --help-markdown failed: {out.stderr}")
    page = pathlib.Path(args.page)
    text = page.read_text(encoding="utf-8")
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        sys.exit(f"{page}: needs one {BEGIN} and one {END} line")
    head, rest = text.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    new = "\n\n" + out.stdout.rstrip("\n") + "\n\n"
    if args.check:
        if old == new:
            print(f"{page}: the flag tables match the binary's")
            return
        diff = difflib.unified_diff(old.splitlines(), new.splitlines(),
                                    "committed", "encoder-server", lineterm="")
        print("\n".join(diff))
        sys.exit(f"{page} differs from `encoder-server --help-markdown`: "
                 "regenerate it with `cmake --build build --target "
                 "docs-configuration` (or scripts/configuration_doc.py)")
    page.write_text(head + BEGIN + new + END + tail, encoding="utf-8")
    print(f"{page}: written")


if __name__ == "__main__":
    main()
