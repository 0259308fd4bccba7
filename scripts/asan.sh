#!/usr/bin/env bash
# The AddressSanitizer + UndefinedBehaviorSanitizer job (clang-14): every
# target, the whole test suite and the libFuzzer targets, built once in
# build-asan (ENCODER_FUZZ=ON, tests on), then ctest with halt_on_error.
# scripts/fuzz.sh reuses the same build dir, so the fuzz stage builds
# nothing more. LeakSanitizer ignores only the start-up allocations that
# LibTorch, protobuf and gRPC keep in static registries
# (tests/sanitizers/lsan.supp); our code is never suppressed.
# Usage: scripts/asan.sh [CTEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${ASAN_BUILD_DIR:-build-asan}"
jobs="$(nproc)"  # before OMP_NUM_THREADS, which nproc honours
# shellcheck source=scripts/asan_env.sh
source scripts/asan_env.sh
asan_configure "$build"
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 1800 "$@"
