#!/usr/bin/env bash
# One rotary checkpoint under several scalings, compared by the probes:
# serves DIR as "default" (its own config.json) and as linearF, dynamicF
# and yarnF (--rope-scaling, factor F), runs `encoder-client report` with
# the extrapolation probe to MULTIPLE times each model's trained length,
# and writes one HTML page whose charts draw the four side by side. The
# server runs --long-input=auto, so each model's reach is also measured at
# load (its table's last column; LIMIT: --max-extrapolation-tokens).
# Usage: rope_scaling_report.sh DIR OUT.html [FACTOR=4] [MULTIPLE=8]
#        [TEXT] [LIMIT=8192]
# Needs build/encoder-server and build/encoder-client (the test build).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:?checkpoint directory}"
out="${2:?output HTML file}"
factor="${3:-4}"
multiple="${4:-8}"
text="${5:-Scaling the rotary frequencies moves how far an encoder reads past its trained length.}"
limit="${6:-8192}"
work="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
models="default,linear$factor,dynamic$factor,yarn$factor"
build/encoder-server --listen=127.0.0.1:0 --http-listen=off \
  --ready-file="$work/ready.json" --max-extrapolation-tokens="$limit" \
  --long-input=auto \
  --model-dir="default=$dir" --model-dir="linear$factor=$dir" \
  --model-dir="dynamic$factor=$dir" --model-dir="yarn$factor=$dir" \
  "--rope-scaling=linear$factor={\"rope_type\":\"linear\",\"factor\":$factor}" \
  "--rope-scaling=dynamic$factor={\"rope_type\":\"dynamic\",\"factor\":$factor}" \
  "--rope-scaling=yarn$factor={\"rope_type\":\"yarn\",\"factor\":$factor}" \
  > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 240); do
  [ -s "$work/ready.json" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.5
done
port="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc_port"])' "$work/ready.json")"
build/encoder-client report --target "127.0.0.1:$port" --out "$out" \
  --extrapolation --max-multiple "$multiple" --models "$models" --text "$text"
