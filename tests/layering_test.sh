#!/usr/bin/env bash
# Fails when a layer includes what the layering rules (docs/ARCHITECTURE.md,
# Layout) forbid:
# common/model/batching/diagnostics/runner/tokenizer: no gRPC, no protobuf;
# the HTTP transport (server/transport): HTTP only, none of the project's
# layers; the core (server/core): no gRPC, protobuf or LibTorch; the HTTP
# front: the core only, no gRPC, protobuf or gRPC front (server/service);
# common, batching, tokenizer, the model handle (server/api) and the model
# vocabulary it uses (model/config.h, model/names.cc, the scheme's plain
# types in model/positional/, kernels/cpu_features and kernel_trace.h):
# no LibTorch either; the core, service and the HTTP front: no runner or
# diagnostics, only the model handle (server/api); the fronts: no model/
# header either; no scheme's type named (SchemeType::k) outside
# model/positional/;
# metrics: none of the layers above it (the HTTP layer serves /metrics);
# the composition root (server/app) is included by server/main.cc alone,
# and the fronts build no core: only the app does.
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
core="server/common/*.h server/model/*.h server/model/*.cc server/model/*/*.h server/model/*/*.cc
server/batching/*.h server/batching/*.cc server/api/*.h
server/diagnostics/*.h server/diagnostics/*.cc server/runner/*.h server/runner/*.cc
server/tokenizer/*.h server/tokenizer/*.cc"
check "$core server/core/*.h server/core/*.cc" "grpc|grpcpp|google/protobuf|encoder/v1" "gRPC/protobuf"
check "server/core/*.h server/core/*.cc" "torch|ATen|c10|server/(service|http)/" \
  "LibTorch or front (the core is front-neutral)"
check "server/http/*.h server/http/*.cc" "grpc|grpcpp|google/protobuf|encoder/v1|server/service/" \
  "gRPC (the HTTP front maps into server/core)"
check "server/common/*.h server/batching/*.h server/batching/*.cc
server/tokenizer/*.h server/tokenizer/*.cc server/api/*.h
server/model/config.h server/model/names.cc server/model/positional/scheme.h
server/model/positional/traits.h server/model/positional/reach.h
server/model/positional/description.h server/model/kernels/cpu_features.h
server/model/kernels/cpu_features.cc server/model/kernels/kernel_trace.h" \
  "torch|ATen|c10" "LibTorch"
check "server/transport/*.h server/transport/*.cc" "grpc|grpcpp|google/protobuf|encoder/v1|torch|ATen|c10|server/(service|http|core|api|auth|runner|model|batching|metrics|diagnostics|app)/" \
  "project or RPC (the HTTP transport knows HTTP only)"
# The core and the fronts reach the models through the handle (server/api)
# only; the fronts include no model/ header at all.
check "server/service/*.h server/service/*.cc server/http/*.h server/http/*.cc server/core/*.h server/core/*.cc" \
  "server/(runner|diagnostics)/|server/model/encoder\.h|torch|ATen|c10" \
  "model internals (the core and fronts use the handle, server/api)"
check "server/service/*.h server/service/*.cc server/http/*.h server/http/*.cc" \
  "server/model/" "model (a front renders what the handle reports)"
# Metrics renders; the HTTP layer serves /metrics: metrics includes no
# front, transport, auth or model layer.
check "server/metrics/*.h server/metrics/*.cc" \
  "server/(http|transport|auth|core|service|runner|model|diagnostics|app)/" \
  "upward (metrics is below every front that reports to it)"
# Tracing: the trace context and the tracer know no RPC (the OTLP
# exporter alone speaks gRPC and protobuf), and no layer but the fronts,
# the app and the tracer's own tests reaches the exporter.
check "server/tracing/trace_context.h server/tracing/trace_context.cc
server/tracing/call_trace.h server/tracing/tracer.h server/tracing/tracer.cc" \
  "grpc|grpcpp|google/protobuf|encoder/v1|opentelemetry/|torch|ATen|c10|server/(service|http|transport|core|api|runner|model|app)/" \
  "RPC or upward (the tracer is below the fronts; only otlp_exporter.cc speaks OTLP)"
check "$core server/core/*.h server/core/*.cc server/service/*.h server/service/*.cc
server/http/*.h server/http/*.cc server/logging/*.h server/logging/*.cc" \
  "server/tracing/otlp_exporter.h" "OTLP exporter (the app builds it)"
# Every layer below the composition root.
check "$core server/core/*.h server/core/*.cc server/service/*.h server/service/*.cc
server/http/*.h server/http/*.cc server/transport/*.h server/transport/*.cc
server/metrics/*.h server/metrics/*.cc server/logging/*.h server/logging/*.cc server/auth/*.h server/auth/*.cc
server/hub/*.h server/hub/*.cc" "server/app/" "composition root (server/app is the top layer)"
hits=$(cd "$root" && grep -nE "make_unique<core::Inference>|new core::Inference|core::Inference [a-z_]+\(" \
  server/service/*.cc server/service/*.h server/http/*.cc server/http/*.h 2>/dev/null)
if [ -n "$hits" ]; then
  echo "a front builds the core (server/app builds it and hands it to every front):"
  echo "$hits"
  status=1
fi
# A scheme's home is model/positional/: everyone else asks its traits
# (model/positional/traits.h) or reads the model's description, and never
# names a scheme's type.
hits=$(cd "$root" && grep -rn "SchemeType::k" server --include=*.h --include=*.cc 2>/dev/null |
  grep -v "^server/model/positional/")
if [ -n "$hits" ]; then
  echo "a scheme's type named outside model/positional/:"
  echo "$hits"
  status=1
fi
loose=$(cd "$root" && ls server/*.cc server/*.h 2>/dev/null | grep -v '^server/main.cc$')
if [ -n "$loose" ]; then
  echo "sources loose at server/ (the executable's belong in server/app):"
  echo "$loose"
  status=1
fi
files=$(cd "$root" && ls $core | wc -l)
if [ "$files" -lt 20 ]; then
  echo "expected the core sources under $root, found $files files"
  status=1
fi
[ "$status" -eq 0 ] && echo "layering: $files core files clean"
exit "$status"
