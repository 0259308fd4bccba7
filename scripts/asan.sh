#!/usr/bin/env bash
# The AddressSanitizer + UndefinedBehaviorSanitizer job (clang-14): every
# target, the whole test suite and the libFuzzer targets, built once in
# build-asan (ENCODER_FUZZ=ON, tests on), then ctest. scripts/fuzz.sh
# reuses the same build dir, so the fuzz stage builds nothing more.
#
# Every program the tests run (the GoogleTest binaries, and the
# encoder-server and encoder-client the Python tests start) writes its
# sanitizer reports to build-asan/sanitizer-reports/ rather than stderr: a
# server's leak report at exit would otherwise go unseen by a test that
# does not check the exit status. Any file there fails the job and is
# printed. LeakSanitizer ignores only what LibTorch, protobuf and gRPC keep
# in static registries (tests/sanitizers/lsan.supp); our code is never
# suppressed.
# Usage: scripts/asan.sh [CTEST_ARGS...]   e.g. -R Service to run a subset
set -euo pipefail
cd "$(dirname "$0")/.."
build="${ASAN_BUILD_DIR:-build-asan}"
jobs="$(nproc)"  # before OMP_NUM_THREADS, which nproc honours
# The project's Python environment (.venv, torch 2.15) must exist before
# configure: the tests whose Python computes with torch (hf_parity,
# hf_extrapolation, reference_data and reference_test, head_stats_test's
# reference cases) run on it, and are not registered (or skip) without it.
# Nothing to do after scripts/test.sh has made it.
bash scripts/python_env.sh
# shellcheck source=scripts/asan_env.sh
source scripts/asan_env.sh
asan_configure "$build"
cmake --build "$build" -j "$jobs"
reports="$PWD/$build/sanitizer-reports"
rm -rf "$reports"
mkdir -p "$reports"
export ASAN_OPTIONS="$ASAN_OPTIONS:log_path=$reports/asan"
export UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=$reports/ubsan"
# Tests that run none of our compiled code (formatting, include layering,
# the core-only configure, manifests, the Python reference's self-test, the
# GPU bundle's download-and-configure) are left to scripts/test.sh, and so
# is the conformance suite: its real all-mpnet-base-v2 (110M parameters)
# over the whole corpus would take most of an hour under ASan (hf_parity
# runs its fixture families here). So are three tests of what ships or
# measures rather than of our memory safety, whose server calls the other
# tests make too: the image's runtime tree (deploy_image_runtime: no image
# carries an ASan build) and the benchmarks' plumbing
# (peer_bench_agreement, eager_bench_plumbing): 65, 143 and 101 s under
# ASan, about 2 minutes of the job's wall time. The image's Debian packages
# (deploy_image_packages) are checked against the shipped binaries' ldd,
# which an ASan build's are not (and it has no libencoder_spm.so).
# The two-replica drain behind nginx (deploy_scaleout, 2,000 calls) runs
# here without ASan; under it, the same drain of a server is
# drain_under_traffic's.
# Left to scripts/test.sh too, as tests of what is packaged or rendered
# rather than of new server paths (the calls they make, the other tests
# make under ASan): the Python client's wheel, its install and its parity
# with the CLI (python_package, python_client_install,
# python_client_parity), the version strings (version_consistency), the
# pages Chromium renders (http_docs_page, client_report_integration), and
# the older library generation's saved files (conformance_older_generation:
# the importers that read them run here in hf_parity and the units).
# 55, 30, 83, 17, 11, 22 and 100 s under ASan: about 2.5 minutes of wall.
# So are Prometheus scraping a server (deploy_prometheus: the /metrics
# route runs under ASan in observability) and the README's server command
# (run_server_default_model: the same download and first call run under
# ASan in hub_model_id): 23 and 33 s.
skip='^(format_check|deploy_prometheus|run_server_default_model|layering_includes|core_function_length|core_only_clean|core_only_configure|deploy_manifests|deploy_kubernetes|deploy_helm|deploy_scaleout|hf_reference_selftest|conformance|conformance_older_generation|gpu_bundle_configure|deploy_image_runtime|deploy_image_packages|peer_bench_agreement|eager_bench_plumbing|python_package|python_client_install|python_client_parity|version_consistency|http_docs_page|client_report_integration)$'
status=0
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 1800 \
  -E "$skip" "$@" || status=$?
[ "$status" = 0 ] || bash scripts/failed_tails.sh "$build"
if [ -n "$(ls -A "$reports")" ]; then
  for f in "$reports"/*; do
    echo "=== sanitizer report $f"
    head -n 80 "$f"
  done
  echo "asan: $(ls "$reports" | wc -l) sanitizer report(s), see above" >&2
  status=1
fi
exit "$status"
