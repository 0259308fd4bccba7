#!/usr/bin/env bash
# Installs what the build needs, fetches the pinned LibTorch
# (scripts/libtorch.sh, cached after the first run), builds encoder-server
# and encoder-client, and runs the server on the built-in models (gRPC on
# 127.0.0.1:50051, HTTP on 127.0.0.1:8080). Extra arguments go to the
# server, e.g. --listen=0.0.0.0:50051.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh build
torch="$(bash scripts/libtorch.sh)"
build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DENCODER_BUILD_TESTS=OFF -DENCODER_TORCH_WHEEL="$torch"
cmake --build "$build" -j "$(nproc)" --target encoder-server encoder-client
exec "$build/encoder-server" "$@"
