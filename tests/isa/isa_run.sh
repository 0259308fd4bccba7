#!/usr/bin/env bash
# Runs a test program as it runs on a lesser CPU: isa_run.sh LEVEL PROGRAM
# [ARGS...], LEVEL one of avx2 (an AVX2-only CPU) or avx512_core_bf16 (AVX-512
# with VNNI and BF16, no AMX: an AMD Zen 4). Every layer that picks kernels by
# the CPU is capped at LEVEL: oneDNN (ONEDNN_MAX_CPU_ISA), LibTorch's own
# vectorized kernels (ATEN_CPU_CAPABILITY), MKL (MKL_ENABLE_INSTRUCTIONS) and
# the project's feature detection (ENCODER_CPU_ISA). oneDNN's first verbose
# line says which ISA it ran at; the run fails unless that is LEVEL. A host
# at or below LEVEL has nothing to emulate: exit 77 (CTest's skip), as its
# plain run of PROGRAM covers LEVEL.
set -euo pipefail
level="$1"
shift
flags="$(grep -m1 '^flags' /proc/cpuinfo || true)"
has() { [[ " $flags " == *" $1 "* ]]; }
case "$level" in
  avx2)
    has avx2 || { echo "host lacks avx2"; exit 77; }
    has avx512f || { echo "host is an AVX2 CPU: its plain run covers it"; exit 77; }
    onednn=AVX2 aten=avx2 mkl=AVX2 want="Intel AVX2" ;;
  avx512_core_bf16)
    has avx512_bf16 || { echo "host lacks avx512_bf16"; exit 77; }
    has amx_int8 || has amx_bf16 ||
      { echo "host has no AMX: its plain run covers it"; exit 77; }
    onednn=AVX512_CORE_BF16 aten=avx512 mkl=AVX512
    want="Intel AVX-512 with Intel DL Boost and bfloat16 support" ;;
  *) echo "unknown ISA level $level" >&2; exit 2 ;;
esac
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "emulating $level: ONEDNN_MAX_CPU_ISA=$onednn ATEN_CPU_CAPABILITY=$aten" \
  "MKL_ENABLE_INSTRUCTIONS=$mkl ENCODER_CPU_ISA=$onednn"
status=0
ONEDNN_MAX_CPU_ISA="$onednn" ATEN_CPU_CAPABILITY="$aten" \
  MKL_ENABLE_INSTRUCTIONS="$mkl" ENCODER_CPU_ISA="$onednn" \
  ONEDNN_VERBOSE=profile_create "$@" > "$log" 2>&1 || status=$?
grep -v '^onednn_verbose' "$log" || true
isa="$(grep -m1 '^onednn_verbose.*,isa:' "$log" | sed 's/.*,isa://' || true)"
echo "oneDNN ISA: ${isa:-(oneDNN not used)}"
if [[ -n "$isa" && "$isa" != "$want" ]]; then
  echo "oneDNN ran at \"$isa\", not $level" >&2
  exit 1
fi
exit "$status"
