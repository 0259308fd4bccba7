#!/usr/bin/env bash
# Builds the server, client and forward benchmark, then runs the serving
# benchmark (tests/bench/run_bench.py). Extra arguments go to the script,
# e.g. --duration 30 --json bench.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh test
build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$(nproc)" \
  --target encoder-server encoder-client encoder-bench-forward
/usr/bin/python3 tests/bench/run_bench.py "$build" "$@"
