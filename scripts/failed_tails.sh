#!/usr/bin/env bash
# Prints the last lines of each failed test's output from a build's last
# ctest run (Testing/Temporary/LastTest.log), after the run's summary, where
# the tail of a long log shows them: ctest --output-on-failure prints a
# failed test's output where the test ended, which in a parallel run of
# several hundred tests is the middle of the log.
# Usage: scripts/failed_tails.sh BUILD_DIR [LINES]   (LINES: 40)
set -euo pipefail
log="${1:?usage: failed_tails.sh BUILD_DIR [LINES]}/Testing/Temporary/LastTest.log"
lines="${2:-40}"
[ -f "$log" ] || exit 0
# Progress bars (tqdm's "it/s]" lines) carry nothing a failure needs.
awk -v keep="$lines" '
  /^[0-9]+\/[0-9]+ Testing: / { name = $0; sub(/^[0-9]+\/[0-9]+ Testing: /, "", name); n = 0; inside = 0; next }
  /^Output:$/ { inside = 1; next }
  /^<end of output>$/ { inside = 0; next }
  inside && !/it\/s\]/ && !/^-+$/ { buf[n % keep] = $0; n++; next }
  /^Test Failed\.$/ {
    printf "=== %s failed; the last lines of its output:\n", name
    for (i = (n > keep ? n - keep : 0); i < n; i++) print buf[i % keep]
  }' "$log"
