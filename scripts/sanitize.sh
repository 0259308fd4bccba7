#!/usr/bin/env bash
# The ThreadSanitizer job (clang-14): the batching tests built with
# -fsanitize=thread in build-tsan (ENCODER_SANITIZE=thread) and run with
# halt_on_error. AddressSanitizer and UndefinedBehaviorSanitizer run in the
# libFuzzer build (scripts/fuzz.sh).
#
# The batcher's tests cover its worker threads, queue, drain, memory budget
# and fair share. The service and streaming tests are not run under TSan:
# Debian's gRPC is not instrumented, so every reactor that gRPC hands from
# one of its threads to another shows up as a race (see TESTING.md).
# Usage: scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build="${TSAN_BUILD_DIR:-build-tsan}"
jobs="$(nproc)"  # before OMP_NUM_THREADS, which nproc honours
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_COMPILER=clang++-14 -DENCODER_SANITIZE=thread \
  -DENCODER_TORCH_WHEEL="$(bash scripts/libtorch.sh)" \
  -DENCODER_CTEST_PER_CASE=OFF ${TSAN_CMAKE_ARGS:-}
cmake --build "$build" -j "$jobs" \
  --target batcher_test batcher_responder_test batcher_alone_test \
    batcher_executions_test \
    batch_policy_test \
    cost_and_fairness_test \
    batch_profile_test \
    compute_class_test
OMP_NUM_THREADS=1 \
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/sanitizers/tsan.supp" \
  ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 600 \
    -R "^(batcher_test|batcher_responder_test|batcher_alone_test|batcher_executions_test|batch_policy_test|cost_and_fairness_test|batch_profile_test|compute_class_test)$"
