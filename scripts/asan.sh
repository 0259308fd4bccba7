#!/usr/bin/env bash
# The AddressSanitizer + UndefinedBehaviorSanitizer job (clang-14): every
# test of the suite, built in build-fuzz with ENCODER_FUZZ=ON (our sources
# instrumented for ASan, UBSan and libFuzzer coverage; the same objects the
# fuzz targets of scripts/fuzz.sh link), run by ctest with any sanitizer
# report failing its test. LibTorch, protobuf and gRPC are Debian's,
# uninstrumented; only their process-lifetime allocations are suppressed
# (tests/fuzz/lsan.supp), never our code.
# Usage: scripts/asan.sh [CTEST_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${FUZZ_BUILD_DIR:-build-fuzz}"
jobs="$(nproc)"  # before OMP_NUM_THREADS, which nproc honours
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DENCODER_FUZZ=ON -DENCODER_BUILD_TESTS=ON \
  ${FUZZ_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0:strict_init_order=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 1200 "$@"
