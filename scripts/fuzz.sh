#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) in build-fuzz and
# runs each for SECONDS (default 60) on a copy of its seed corpus. Fails on
# any crash, leak, sanitizer report or timeout.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(safetensors model_config repository hf_config tokenizer_json requests)
build="${FUZZ_BUILD_DIR:-build-fuzz}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DENCODER_FUZZ=ON -DENCODER_BUILD_TESTS=OFF \
  ${FUZZ_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/%/_fuzz}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# LibTorch's own allocations at start-up are not ours to chase; our code's
# leaks are still reported (see tests/fuzz/lsan.supp).
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export OMP_NUM_THREADS=1
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
  echo "fuzz: $t for ${seconds} s"
  "$build/tests/fuzz/${t}_fuzz" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/$t-" "$work/$t" "tests/fuzz/corpus/$t" \
    2>&1 | tail -n 25
done
