#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) in build-asan, the
# build dir scripts/asan.sh configures the same way (after that script they
# are already built), and runs each for SECONDS (default 60) on a copy of its
# seed corpus, one target per core at a time. Fails on any crash, leak,
# sanitizer report or timeout.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(safetensors torch_pickle model_config repository hf_config tokenizer_json requests http_request http_json)
build="${FUZZ_BUILD_DIR:-${ASAN_BUILD_DIR:-build-asan}}"
jobs="$(nproc)"  # before OMP_NUM_THREADS, which nproc honours
# The configuration and the ASAN/UBSAN/LSAN options shared with asan.sh.
# shellcheck source=scripts/asan_env.sh
source scripts/asan_env.sh
asan_configure "$build"
cmake --build "$build" -j "$jobs" --target "${targets[@]/%/_fuzz}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
# One libFuzzer process per core at a time (each is single-threaded); each
# one's output is printed whole when it ends, and any failure fails the run.
run_one() {
  local t="$1" dict=()
  mkdir -p "$work/$t"
  [ -f "tests/fuzz/$t.dict" ] && dict=("-dict=tests/fuzz/$t.dict")
  "$build/tests/fuzz/${t}_fuzz" "${dict[@]}" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$work/$t-" "$work/$t" "tests/fuzz/corpus/$t" \
    > "$work/$t.log" 2>&1
}
declare -A pid_of=()
failed=()
finish() {  # waits for target $1 and prints its log
  local t="$1" rc=0
  wait "${pid_of[$t]}" || rc=$?
  echo "fuzz: $t for ${seconds} s (exit $rc)"
  tail -n 25 "$work/$t.log"
  [ "$rc" -eq 0 ] || failed+=("$t")
  unset "pid_of[$t]"
}
running=()
for t in "${targets[@]}"; do
  if [ "${#running[@]}" -ge "$jobs" ]; then
    finish "${running[0]}"
    running=("${running[@]:1}")
  fi
  run_one "$t" &
  pid_of[$t]=$!
  running+=("$t")
done
for t in "${running[@]}"; do finish "$t"; done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
