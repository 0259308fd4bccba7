#!/usr/bin/env bash
# Fails when a layer includes what the layering rules (README, Layout) forbid:
# common/model/batching/diagnostics/runner/tokenizer: no gRPC, no protobuf;
# common, batching and tokenizer: no LibTorch either.
set -u
root="$1"
status=0
check() {
  local dirs="$1" pattern="$2" what="$3"
  local hits
  hits=$(cd "$root" && grep -nE "^#include [<\"]($pattern)" $dirs 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "forbidden $what include:"
    echo "$hits"
    status=1
  fi
}
core="server/common/*.h server/model/*.h server/model/*.cc server/batching/*.h server/batching/*.cc
server/diagnostics/*.h server/diagnostics/*.cc server/runner/*.h server/runner/*.cc
server/tokenizer/*.h server/tokenizer/*.cc"
check "$core" "grpc|grpcpp|google/protobuf|encoder/v1" "gRPC/protobuf"
check "server/common/*.h server/batching/*.h server/batching/*.cc
server/tokenizer/*.h server/tokenizer/*.cc" "torch|ATen|c10" "LibTorch"
files=$(cd "$root" && ls $core | wc -l)
if [ "$files" -lt 20 ]; then
  echo "expected the core sources under $root, found $files files"
  status=1
fi
[ "$status" -eq 0 ] && echo "layering: $files core files clean"
exit "$status"
