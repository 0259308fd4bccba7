#!/usr/bin/env bash
# Fetches the project's one LibTorch, the pinned torch wheel of
# scripts/libtorch-requirements.txt, and prints the path of its torch/
# directory (what CMake's ENCODER_TORCH_WHEEL takes). Only what a CPU build
# links and includes is unpacked: libtorch_cpu, libc10, the libgomp they
# were built with, the headers and share/cmake; next to them, as the
# wheel's run path expects (torch/lib/../../nvidia/cu13/lib), the CUDA
# runtime and CUPTI libraries that libtorch_cpu.so needs at load time.
# About 550 MB to download, 560 MB unpacked; nothing of Python is needed at
# run time.
#
# Cached: $ENCODER_LIBTORCH_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/
# encoder-server/libtorch) holds one directory per content of the
# requirements file, made complete or not at all, so a second run (or a
# second build tree) downloads nothing. The download goes through pip
# (Debian's python3-pip), so PIP_INDEX_URL, a proxy or pip.conf apply, and
# pip checks each file against the index's sha256.
#
# Usage: libtorch.sh            prints DIR/torch (progress on stderr)
set -euo pipefail
cd "$(dirname "$0")/.."
pins="$PWD/scripts/libtorch-requirements.txt"
cache="${ENCODER_LIBTORCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/encoder-server/libtorch}"
key="$(grep -v -e '^#' -e '^$' "$pins" | sha256sum | cut -c1-16)"
torch_version="$(sed -n 's/^torch==//p' "$pins")"
root="$cache/torch-$torch_version-$key"
if [ -f "$root/.complete" ]; then
  echo "$root/torch"
  exit 0
fi
mkdir -p "$cache"
work="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
echo "libtorch: downloading torch $torch_version (about 550 MB) into $cache" >&2
# The wheel's C++ libraries are the same for every Python version; the
# host's tags only choose which of the identical copies comes.
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: --dest "$work/wheels" -r "$pins" >&2
downloaded=$((SECONDS - start))
python3 - "$work/wheels" "$work/root" <<'PY'
import os
import pathlib
import sys
import zipfile

wheels, root = map(pathlib.Path, sys.argv[1:])
TORCH_LIBS = {"libtorch_cpu.so", "libc10.so", "libgomp.so.1", "libtorch.so",
              "libtorch_global_deps.so"}
CUDA_LIBS = {"libcudart.so.13", "libcupti.so.13"}


def wanted(name):
    if name.startswith(("torch/include/", "torch/share/cmake/")):
        return True
    if name == "torch/version.py":
        return True
    base = name.rsplit("/", 1)[-1]
    if name.startswith("torch/lib/"):
        return base in TORCH_LIBS
    return name.startswith("nvidia/") and base in CUDA_LIBS


found = set()
for wheel in sorted(wheels.glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or not wanted(info.filename):
                continue
            out = root / info.filename
            out.parent.mkdir(parents=True, exist_ok=True)
            with z.open(info) as src, open(out, "wb") as dst:
                while chunk := src.read(1 << 22):
                    dst.write(chunk)
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(out, mode or 0o644)
            found.add(info.filename.rsplit("/", 1)[-1])
missing = (TORCH_LIBS | CUDA_LIBS) - found
if missing:
    sys.exit(f"libtorch: the wheels lack {sorted(missing)}")
PY
touch "$work/root/.complete"
rm -rf "$root"
mv "$work/root" "$root"
echo "libtorch: torch $torch_version ready in $root (download" \
  "${downloaded} s, unpack $((SECONDS - start - downloaded)) s)" >&2
echo "$root/torch"
