#!/usr/bin/env bash
# The GPU path, run for real, on a CUDA host without network: unpacks the
# Debian bookworm .debs of scripts/gpu/bundle.sh into a prefix, builds the
# server against the host PyTorch's CUDA LibTorch and runs, in order of
# importance: the GPU reference/parity tests, an end-to-end gRPC Embed and
# Diagnose against `encoder-server --device=cuda` (encoder-client and the
# Python client), a CUDA out-of-memory request that must fail with
# RESOURCE_EXHAUSTED while the server keeps serving, and a benchmark (the
# server at 32 callers, encoder-bench-forward and PyTorch eager).
#
# Typical use: on a networked bookworm machine
#   bash scripts/gpu/bundle.sh .gpu-bundle        (ignored by git, ~40 MiB)
# then, with the repository and .gpu-bundle/ on the GPU host (the device
# runner: carry [".gpu-bundle"]; about 8 minutes on 16 cores):
#   bash scripts/gpu/check.sh .gpu-bundle "$OUT"
#
# Usage: check.sh [options] BUNDLE OUTDIR
#   --configure-only   unpack, fix up, configure and check that CMake found
#                      the bundle's packages in the prefix; no build, no GPU
#                      (tests/gpu runs this on a CPU machine)
#   --torch-wheel DIR  LibTorch of a wheel's torch/ directory, CPU only
#                      (cmake/torch_wheel.cmake). Default: python3's torch
#                      through its own CMake config, with CUDA (nvcc)
#   --prefix DIR       where the .debs are unpacked (default
#                      /tmp/encoder-prefix; emptied first)
#   --build-dir DIR    (default /tmp/encoder-gpu-build)
#   --python PY        Python with torch (default python3)
#   --strict | --no-strict
#                      CMake searches only the prefix (plus the LibTorch,
#                      compiler, CUDA and glibc paths given to it), never
#                      /usr or PATH: proves the bundle complete, and no
#                      host -dev package mixes in. Default: --strict with
#                      --configure-only; otherwise strict first, and a
#                      configure that fails so is retried without
#   --jobs N           build jobs (default nproc)
# Environment:
#   CHECK_TIME_LIMIT_S   whole run (default 480); late steps are skipped,
#                        benchmark cells first, when time runs out
#   CHECK_BENCH          reduced (default: float32, bfloat16, float16 at
#                        128 tokens), full (x 16, 128, 512 tokens) or none
#   CHECK_BENCH_DTYPES, CHECK_BENCH_LENGTHS, CHECK_BENCH_BATCHES
#                        override the grid ("float32 bfloat16", "16 128 512",
#                        "1,32,128")
#   CHECK_BENCH_SECONDS  per measurement (default 1)
#   CHECK_REQUEST_PATH_SECONDS
#                        per variant of the request_path steps (default 3)
#   CHECK_CUDA_ARCH      CMAKE_CUDA_ARCHITECTURES (default 90: H100/H200)
#   CHECK_CXX_FLAGS      CMAKE_CXX_FLAGS (default "-include cstdint":
#                        bookworm's headers under a newer GCC)
#   CHECK_ONLY           run only the steps matching these glob patterns,
#                        e.g. "e2e_* oom" against an existing --build-dir
#                        and --prefix (the others are recorded as skipped)
#   CHECK_BUILD_TARGETS  what the build step builds (default: encoder-server
#                        encoder-client encoder-bench-forward
#                        encoder-bench-echo reference_test)
#   CHECK_DEVICE         cuda (default); cpu runs the server steps on the
#                        CPU to try the script's plumbing where no GPU is
#                        (the out-of-memory step is then skipped unless
#                        CHECK_OOM_BUDGET_BYTES, default 2^50, is under
#                        1 GiB: then admission refuses it)
#   CHECK_PARITY_REGEX   ctest -R of the parity step (default ^reference:
#                        reference_data, reference_test, the CPU's
#                        reference_cpu_{bfloat16,float16} and
#                        reference_cuda_{float32,float16,bfloat16})
# Writes OUTDIR/check.log (everything printed) and OUTDIR/check.json (each
# step's name, rc, seconds; the GPU's name; the measurements), rewritten
# after every step. A failing step does not stop the later ones. Exit 0
# when no step failed.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
t_start=$(date +%s)

usage() { sed -n '2,68p' "$0" | sed 's/^# \{0,1\}//'; }
configure_only=0
torch_wheel=""
prefix=/tmp/encoder-prefix
build=/tmp/encoder-gpu-build
python=python3
strict=""
jobs="$(nproc)"
while [ $# -gt 0 ]; do
  case "$1" in
    --configure-only) configure_only=1; shift ;;
    --torch-wheel) torch_wheel="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --strict) strict=1; shift ;;
    --no-strict) strict=0; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "check.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 2 ]; then
  usage >&2
  exit 2
fi
# auto: strict, retried without if that configure fails.
[ -z "$strict" ] && { [ "$configure_only" = 1 ] && strict=1 || strict=auto; }
bundle="$(cd "$1" 2>/dev/null && pwd)" || { echo "check.sh: no bundle directory $1" >&2; exit 2; }
mkdir -p "$2"
out="$(cd "$2" && pwd)"
mkdir -p "$(dirname "$prefix")" "$(dirname "$build")"
prefix="$(cd "$(dirname "$prefix")" && pwd)/$(basename "$prefix")"
build="$(cd "$(dirname "$build")" && pwd)/$(basename "$build")"
case "$prefix" in /|/usr|/usr/*) echo "check.sh: refusing prefix $prefix" >&2; exit 2 ;; esac
libdir="$prefix/usr/lib/x86_64-linux-gnu"
time_limit="${CHECK_TIME_LIMIT_S:-480}"
device="${CHECK_DEVICE:-cuda}"
bench_s="${CHECK_BENCH_SECONDS:-1}"

log="$out/check.log"
: > "$log"
exec > >(tee -a "$log") 2>&1
rm -rf "$out/bench" "$out/steps.tsv" "$out/metrics.tsv" "$out/servers"
mkdir -p "$out/bench" "$out/servers"
: > "$out/steps.tsv"
: > "$out/metrics.tsv"

say() { printf '%s\n' "$*"; }
elapsed() { echo $(( $(date +%s) - t_start )); }
remaining() { echo $(( time_limit - $(date +%s) + t_start )); }
# metric KEY VALUE: a number or a string in check.json's "metrics".
metric() {
  printf '%s\t%s\n' "$1" "$(printf '%s' "$2" | tr '\t\n' '  ')" >> "$out/metrics.tsv"
  say "   $1 = $2"
}
note() { step_note="${step_note:+$step_note; }$*"; say "   note: $*"; }

write_json() {
  "$json_python" - "$out" "$mode" "$time_limit" "$t_start" <<'EOF'
import glob, json, os, sys, time
out, mode, limit, t0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def num(v):
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v
steps = []
for line in open(os.path.join(out, "steps.tsv")):
    name, rc, secs, skipped, note = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
    steps.append({"name": name, "rc": int(rc), "seconds": float(secs),
                  "skipped": int(skipped), "note": note})
metrics = {}
for line in open(os.path.join(out, "metrics.tsv")):
    k, _, v = line.rstrip("\n").partition("\t")
    metrics[k] = num(v)
bench = []
for path in sorted(glob.glob(os.path.join(out, "bench", "*.json"))):
    name = os.path.basename(path)[:-5]
    try:
        data = json.load(open(path))
        kind, dtype, length = name.split("_")
        length = int(length[1:])
    except (OSError, ValueError):
        continue
    try:
      if kind == "server":
        bench.append({"kind": "server_32_callers", "dtype": dtype,
                      "length": length,
                      "batch_mean": data["batch_size"]["mean"],
                      "tokens_per_s": data["throughput"]["tokens_per_s"],
                      "sequences_per_s": data["throughput"]["sequences_per_s"],
                      "p50_ms": data["latency_ms"]["p50"],
                      "p99_ms": data["latency_ms"]["p99"],
                      "failed_requests": data["failed_requests"]})
      elif kind == "eager":
        for r in data["rows"]:
            bench.append({"kind": "forward", "dtype": dtype, "length": length,
                          "batch": r["batch_size"],
                          "tokens_per_s": r["ours_tokens_per_s"]})
            bench.append({"kind": "eager", "dtype": dtype, "length": length,
                          "batch": r["batch_size"],
                          "tokens_per_s": r["eager_tokens_per_s"],
                          "forward_over_eager": r["ratio"]})
    except (KeyError, TypeError) as e:
        print("   check.json: %s: %r" % (path, e))
failed = [s["name"] for s in steps if s["rc"] != 0 and not s["skipped"]]
doc = {"mode": mode, "gpu_name": metrics.get("gpu_name", ""),
       "time_limit_s": limit, "total_seconds": round(time.time() - t0, 1),
       "steps_run": sum(1 for s in steps if not s["skipped"]),
       "steps_skipped": sum(s["skipped"] for s in steps),
       "steps_failed": len(failed), "failed": failed,
       "steps": steps, "metrics": metrics, "bench": bench}
tmp = os.path.join(out, "check.json.tmp")
with open(tmp, "w") as f:
    json.dump(doc, f, indent=1)
os.replace(tmp, os.path.join(out, "check.json"))
EOF
}

# step NAME MIN_REMAINING_S FUNCTION ARGS...: runs FUNCTION (in this shell:
# it may set variables), records name, rc and seconds. Skipped when fewer
# than MIN_REMAINING_S seconds of the time limit are left (0: always runs).
step() {
  local name="$1" min_s="$2" fn="$3"; shift 3
  local t0 t1 rc secs
  step_note=""
  if [ -n "${CHECK_ONLY:-}" ]; then
    local pattern selected=0
    for pattern in $CHECK_ONLY; do
      # shellcheck disable=SC2053
      [[ "$name" == $pattern ]] && selected=1
    done
    if [ "$selected" = 0 ]; then
      printf '%s\t0\t0\t1\tnot selected (CHECK_ONLY)\n' "$name" >> "$out/steps.tsv"
      return 0
    fi
  fi
  if [ "$min_s" -gt 0 ] && [ "$(remaining)" -lt "$min_s" ]; then
    say ""
    say "== [$(elapsed) s] $name: SKIPPED ($(remaining) s left of $time_limit, needs $min_s)"
    printf '%s\t0\t0\t1\tskipped for time\n' "$name" >> "$out/steps.tsv"
    write_json
    return 0
  fi
  say ""
  say "== [$(elapsed) s] $name"
  t0=$(date +%s.%N)
  "$fn" "$@"
  rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  if [ "$rc" -eq 0 ]; then
    say "-- $name: ok (${secs} s)"
  else
    say "-- $name: FAILED rc=$rc (${secs} s)${step_note:+: $step_note}"
  fi
  printf '%s\t%d\t%s\t0\t%s\n' "$name" "$rc" "$secs" \
    "$(printf '%s' "$step_note" | tr '\t\n' '  ')" >> "$out/steps.tsv"
  write_json
  return 0
}

# Runs a command with a time limit, printing it first.
run() {
  local limit="$1"; shift
  say "   \$ $*" | cut -c1-400 >&2
  timeout -k 10 "$limit" "$@"
}

# ---------------------------------------------------------------- servers
server_pid=""
server_port=""
# start_server LABEL ARGS...: encoder-server on a free port; waits until
# it writes its ready file (at most 150 s).
start_server() {
  local label="$1"; shift
  local dir="$out/servers/$label"
  rm -rf "$dir"; mkdir -p "$dir"
  say "   \$ encoder-server $* (log: servers/$label/server.log)"
  "$build/encoder-server" --listen=127.0.0.1:0 --ready-file="$dir/ready.json" \
    --drain-grace=2s "$@" > "$dir/server.log" 2>&1 &
  server_pid=$!
  server_port=""
  local i
  for i in $(seq 300); do
    if [ -s "$dir/ready.json" ]; then
      server_port="$("$json_python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc_port"])' "$dir/ready.json" 2>/dev/null)"
      [ -n "$server_port" ] && break
    fi
    if ! kill -0 "$server_pid" 2>/dev/null; then
      say "   server exited before it was ready:"; tail -n 20 "$dir/server.log"
      server_pid=""
      return 1
    fi
    sleep 0.5
  done
  if [ -z "$server_port" ]; then
    say "   server not ready after 150 s:"; tail -n 20 "$dir/server.log"
    stop_server
    return 1
  fi
  say "   serving on 127.0.0.1:$server_port (pid $server_pid)"
}
stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null
  local i
  for i in $(seq 60); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}
trap 'stop_server' EXIT
# client LIMIT_S SUBCOMMAND ARGS...: encoder-client against the server.
client() {
  local limit="$1"; shift
  say "   \$ encoder-client $*" | cut -c1-300 >&2
  timeout -k 5 "$limit" "$build/encoder-client" "$@" --target "127.0.0.1:$server_port"
}

# ------------------------------------------------------------------ steps
do_env() {
  local rc=0 gpu
  metric configure_only "$configure_only"
  metric strict "$strict"
  metric cores "$(nproc)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>&1 | head -n1)"
    metric gpu_name "$gpu"
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    metric gpu_memory_mib "$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -n1 | tr -d ' ')"
  else
    metric gpu_name "none"
    note "no nvidia-smi"
    [ "$configure_only" = 0 ] && [ "$device" = cuda ] && rc=1
  fi
  say "   cmake: $(cmake --version | head -n1); ninja: $(ninja --version 2>&1)"
  say "   c++: $(c++ --version 2>&1 | head -n1)"
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
    say "   nvcc: $( (command -v nvcc || echo /usr/local/cuda/bin/nvcc) | head -n1) $("$( (command -v nvcc || echo /usr/local/cuda/bin/nvcc) | head -n1)" --version | tail -n2 | head -n1)"
  fi
  if [ -z "$torch_wheel" ] || [ "$configure_only" = 0 ]; then
    "$python" -c 'import sys, torch; print("   python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' || rc=1
  fi
  say "   bundle: $(ls "$bundle"/*.deb 2>/dev/null | wc -l) .debs, $(du -cb "$bundle"/*.deb 2>/dev/null | tail -n1 | cut -f1) bytes"
  return $rc
}

do_unpack() {
  local deb n=0
  rm -rf "$prefix"
  mkdir -p "$prefix"
  if ! compgen -G "$bundle/*.deb" >/dev/null; then
    note "no .deb files in $bundle"
    return 1
  fi
  for deb in "$bundle"/*.deb; do
    dpkg -x "$deb" "$prefix" || { note "dpkg -x failed on $(basename "$deb")"; return 1; }
    n=$((n + 1))
  done
  # bookworm puts a few libraries in /lib: one tree, as with merged /usr.
  if [ -d "$prefix/lib" ] && [ ! -L "$prefix/lib" ]; then
    mkdir -p "$prefix/usr/lib"
    cp -a "$prefix/lib/." "$prefix/usr/lib/" && rm -rf "$prefix/lib" &&
      ln -s usr/lib "$prefix/lib"
  fi
  metric unpacked_debs "$n"
  metric prefix_bytes "$(du -sb "$prefix" | cut -f1)"
  say "   $n packages unpacked into $prefix"
}

# The host's copy of a library: NAME, then NAME less its trailing version
# components down to libfoo.so.N.
host_library() {
  local name="$1" d
  while :; do
    for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib64 /lib64 /usr/local/lib; do
      if [ -e "$d/$name" ]; then echo "$d/$name"; return 0; fi
    done
    case "$name" in
      *.so.*.*) name="${name%.*}" ;;
      *) return 1 ;;
    esac
  done
}

do_fixup() {
  local l t h f n_abs=0 n_host=0 n_cmake=0 n_pc=0 n_wrap=0 dangling=""
  # 0. bookworm's libcurl.so.4 is there only for prometheus-cpp's CMake
  # config (find_package(CURL)); in LD_LIBRARY_PATH it would shadow the
  # host's for CMake itself, without its Kerberos/LDAP/... libraries. It
  # moves aside; the libcurl.so link follows it.
  local aside="$prefix/usr/lib/encoder-check-aside"
  if compgen -G "$libdir/libcurl.so.4*" > /dev/null; then
    mkdir -p "$aside"
    mv "$libdir"/libcurl.so.4* "$aside/"
    [ -L "$libdir/libcurl.so" ] &&
      ln -sfn "$aside/$(basename "$(readlink "$libdir/libcurl.so")")" "$libdir/libcurl.so"
  fi
  # 1. Absolute links (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13)
  # point into the prefix.
  while IFS= read -r -d '' l; do
    t="$(readlink "$l")"
    case "$t" in /*) ;; *) continue ;; esac
    if [ -e "$prefix$t" ] || [ -L "$prefix$t" ]; then
      ln -sfn "$prefix$t" "$l"; n_abs=$((n_abs + 1))
    fi
  done < <(find "$prefix" -type l -print0)
  # 2. Development links whose library the bundle leaves to the host
  # (bundle.sh HOST_RUNTIME: libssl.so.3, libz.so.1) point at the host's.
  while IFS= read -r -d '' l; do
    t="$(basename "$(readlink "$l")")"
    if h="$(host_library "$t")"; then
      ln -sfn "$h" "$l"; n_host=$((n_host + 1))
      say "   $(basename "$l") -> $h (host)"
    else
      dangling+=" $(basename "$l")"
    fi
  done < <(find "$libdir" -xtype l -name 'lib*.so*' -print0)
  [ -n "$dangling" ] && say "   still dangling (unused, or missing on this host):$dangling"
  # 3. Absolute /usr paths inside CMake package files and pkg-config files
  # (Debian's configs are relocatable but compare against /usr; the .pc
  # files say prefix=/usr) move into the prefix.
  while IFS= read -r -d '' f; do
    if grep -q '/usr' "$f"; then
      sed -i -E "s#([\"; (=])/usr([/\";)]|\$)#\\1$prefix/usr\\2#g" "$f"
      n_cmake=$((n_cmake + 1))
    fi
  done < <(find "$prefix/usr/lib/x86_64-linux-gnu/cmake" "$prefix/usr/lib/cmake" \
             "$prefix/usr/share/cmake" -name '*.cmake' -print0 2>/dev/null)
  while IFS= read -r -d '' f; do
    sed -i -E "s#(^|[= :]|-I|-L)/usr(/|\$| )#\\1$prefix/usr\\2#g" "$f"
    n_pc=$((n_pc + 1))
  done < <(find "$prefix" -name '*.pc' -print0)
  # 4. Programs (protoc, grpc_cpp_plugin, pkgconf) run through wrappers
  # that find their libraries in the prefix.
  local real="$prefix/usr/libexec/encoder-check"
  mkdir -p "$real"
  local progs=()
  for f in "$prefix"/usr/bin/*; do
    t="$(readlink -f "$f")"
    [ -f "$t" ] && head -c 4 "$t" | grep -q ELF || continue
    [ -e "$real/$(basename "$t")" ] || cp -p "$t" "$real/$(basename "$t")"
    progs+=("$f:$(basename "$t")")
  done
  for f in "${progs[@]}"; do
    l="${f%%:*}"; t="${f#*:}"
    rm -f "$l"
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
      "$libdir" "$real/$t" > "$l"
    chmod +x "$l"
    n_wrap=$((n_wrap + 1))
  done
  # Every library of the bundle loads with the prefix and the host (curl,
  # which only prometheus-cpp's push library needs, apart).
  local unresolved=0 so
  while IFS= read -r -d '' so; do
    case "$(basename "$so")" in libcurl*|libprometheus-cpp-push*) continue ;; esac
    if ldd "$so" 2>/dev/null | grep -q 'not found'; then
      say "   $(basename "$so"): $(ldd "$so" | grep 'not found' | awk '{print $1}' | tr '\n' ' ')"
      unresolved=$((unresolved + 1))
    fi
  done < <(find "$libdir" -maxdepth 1 -type f -name 'lib*.so.*' -print0)
  metric fixup_unresolved_libraries "$unresolved"
  metric fixup_absolute_links "$n_abs"
  metric fixup_host_links "$n_host"
  metric fixup_cmake_files "$n_cmake"
  metric fixup_pc_files "$n_pc"
  metric fixup_wrapped_programs "$n_wrap"
  local rc=0
  for f in protoc pkgconf; do
    if ! "$prefix/usr/bin/$f" --version > /dev/null 2>&1; then
      note "$f from the prefix does not run"; rc=1
    fi
  done
  say "   protoc $("$prefix/usr/bin/protoc" --version 2>&1), pkgconf $("$prefix/usr/bin/pkgconf" --version 2>&1)"
  # protoc with the gRPC plugin, as the build runs them.
  local gen="$out/.protoc-check"
  rm -rf "$gen"; mkdir -p "$gen"
  if "$prefix/usr/bin/protoc" -I"$repo/proto" --cpp_out="$gen" --grpc_out="$gen" \
       --plugin=protoc-gen-grpc="$prefix/usr/bin/grpc_cpp_plugin" \
       grpc/health/v1/health.proto &&
     [ -s "$gen/grpc/health/v1/health.grpc.pb.cc" ]; then
    say "   protoc + grpc_cpp_plugin: generated $(ls "$gen"/grpc/health/v1 | wc -l) files"
  else
    note "protoc with grpc_cpp_plugin from the prefix failed"; rc=1
  fi
  rm -rf "$gen"
  [ "$unresolved" -eq 0 ] || { note "$unresolved libraries of the bundle need libraries neither it nor the host has"; rc=1; }
  for l in libssl.so libcrypto.so libz.so; do
    if [ ! -e "$libdir/$l" ]; then
      note "$l: neither in the bundle nor on this host (bundle.sh HOST_RUNTIME)"; rc=1
    fi
  done
  return $rc
}

do_configure() {
  local rc
  if [ "$strict" = auto ]; then
    strict=1
    if configure_once; then
      metric configure_strict 1
      return 0
    fi
    note "the strict configure failed (above); retrying without --strict"
    strict=0
  fi
  configure_once
  rc=$?
  metric configure_strict "$strict"
  return $rc
}

configure_once() {
  local args nvcc torch_cmake torch_lib
  args=(-S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
    "-DCMAKE_PREFIX_PATH=$prefix/usr;$libdir/cmake"
    "-DPKG_CONFIG_EXECUTABLE=$prefix/usr/bin/pkg-config"
    "-DOPENSSL_ROOT_DIR=$prefix/usr"
    # FindCURL: the bundle's curl through pkg-config, never a CMake config
    # of the host's.
    -DCURL_NO_CURL_CMAKE=ON
    "-DCMAKE_MAKE_PROGRAM=$(command -v ninja)"
    "-DCMAKE_CXX_COMPILER=$(command -v c++ || command -v g++)"
    "-DCMAKE_CXX_FLAGS=${CHECK_CXX_FLAGS--include cstdint}"
    "-DENCODER_CONFORMANCE_PYTHON=$(command -v "$python" || echo "$python")"
    # tests/http and tests/tokenizer want Node; they are not run here.
    "-DNODE_EXECUTABLE=$(command -v node || echo /bin/false)"
    "-DNPM_EXECUTABLE=$(command -v npm || echo /bin/false)")
  if [ "$strict" = 1 ]; then
    # Nothing from /usr or PATH: only the prefix and what is named here.
    # civetweb's config looks up glibc's libdl and librt, which are the
    # host's C library, not a package of the bundle: named from the
    # compiler.
    local cxx; cxx="$(command -v c++ || command -v g++)"
    local glibc_include
    glibc_include="$(echo '#include <dlfcn.h>' | "$cxx" -x c++ -M - 2>/dev/null |
      tr ' \\' '\n\n' | grep '/dlfcn\.h$' | head -n1)"
    glibc_include="$(dirname "${glibc_include:-/usr/include/dlfcn.h}")"
    args+=(-DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF
      -DCMAKE_FIND_USE_SYSTEM_ENVIRONMENT_PATH=OFF
      -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
      -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
      "-DLIBDL_INCLUDE_DIRS=$glibc_include"
      "-DLIBDL_LIBRARIES=$("$cxx" -print-file-name=libdl.a)"
      "-DLIBRT_INCLUDE_DIRS=$glibc_include"
      "-DLIBRT_LIBRARIES=$("$cxx" -print-file-name=librt.a)"
      "-DCUDAToolkit_rt_LIBRARY=$("$cxx" -print-file-name=librt.a)")
  fi
  if [ -n "$torch_wheel" ]; then
    args+=("-DENCODER_TORCH_WHEEL=$torch_wheel")
    metric libtorch "wheel (CPU) $torch_wheel"
  else
    # As scripts/cuda_build.sh: the wheel's own config, with the host's
    # CUDA toolkit, and Torch/Caffe2/libraries named so that nothing else
    # is picked up.
    torch_cmake="$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')" ||
      { note "python3 has no torch"; return 1; }
    torch_lib="$(cd "$torch_cmake/../../lib" && pwd)"
    nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
    [ -x "$nvcc" ] || { note "no nvcc"; return 1; }
    export PATH="$(dirname "$nvcc"):$PATH"
    local cuda_root; cuda_root="$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)"
    local arch="${CHECK_CUDA_ARCH:-90}"
    args+=(-DENCODER_TORCH_WHEEL=
      "-DTorch_DIR=$torch_cmake/Torch" "-DCaffe2_DIR=$torch_cmake/Caffe2"
      "-DTORCH_LIBRARY=$torch_lib/libtorch.so"
      "-Dc10_LIBRARY=$torch_lib/libc10.so"
      "-DC10_CUDA_LIBRARY=$torch_lib/libc10_cuda.so"
      "-DCMAKE_CUDA_COMPILER=$nvcc"
      "-DCUDA_TOOLKIT_ROOT_DIR=$cuda_root" "-DCUDAToolkit_ROOT=$cuda_root"
      "-DCMAKE_CUDA_ARCHITECTURES=$arch"
      "-DTORCH_CUDA_ARCH_LIST=${arch:0:-1}.${arch: -1}")
    metric libtorch "$torch_cmake (CUDA, nvcc $nvcc)"
  fi
  rm -f "$build/CMakeCache.txt"
  run 600 cmake "${args[@]}"
}

# CMake's cache: where each package of the bundle was found. Every one must
# be in the prefix.
do_verify_prefix() {
  local cache="$build/CMakeCache.txt" key v where bad=0 n=0 real_prefix
  [ -f "$cache" ] || { note "no CMakeCache.txt"; return 1; }
  real_prefix="$(readlink -f "$prefix")"
  local required=(gRPC_DIR absl_DIR prometheus-cpp_DIR civetweb_DIR spdlog_DIR
    fmt_DIR CLI11_DIR nlohmann_json_DIR GTest_DIR Protobuf_INCLUDE_DIR
    Protobuf_LIBRARY_RELEASE Protobuf_PROTOC_EXECUTABLE ICU_INCLUDE_DIR
    ICU_UC_LIBRARY_RELEASE ICU_DATA_LIBRARY_RELEASE OPENSSL_INCLUDE_DIR
    OPENSSL_SSL_LIBRARY ZLIB_INCLUDE_DIR CURL_INCLUDE_DIR "c-ares_INCLUDE_DIR|c-ares_DIR"
    "c-ares_LIBRARY|c-ares_DIR" PCRE2_PREFIX pkgcfg_lib_RE2_re2
    pkgcfg_lib_PCRE2_pcre2-8 Boost_DIR boost_headers_DIR
    PKG_CONFIG_EXECUTABLE)
  say "   found (CMakeCache.txt):"
  local alt
  for alt in "${required[@]}"; do
    # KEY or KEY|OTHER: the first one set.
    v=""
    for key in ${alt//|/ }; do
      v="$(grep -m1 "^$key:[A-Z]*=" "$cache" | cut -d= -f2-)"
      [ -n "$v" ] && [[ "$v" != *NOTFOUND ]] && break
    done
    if [ -z "$v" ] || [[ "$v" == *NOTFOUND ]]; then
      where="MISSING"; bad=$((bad + 1))
    elif [[ "$v" == "$prefix/"* || "$v" == "$real_prefix/"* ]]; then
      where="prefix"; n=$((n + 1))
    else
      where="OUTSIDE THE PREFIX"; bad=$((bad + 1))
    fi
    printf '   %-36s %-20s %s\n' "$key" "[$where]" "${v/#$prefix/<prefix>}"
  done
  metric prefix_packages_found "$n"
  metric prefix_packages_bad "$bad"
  [ "$bad" -eq 0 ] && return 0
  note "$bad package entries not found in the prefix"
  # Without --strict, a package the host has itself may serve: reported.
  [ "$strict" = 1 ]
}

# shellcheck disable=SC2206
build_targets=(${CHECK_BUILD_TARGETS:-encoder-server encoder-client encoder-bench-forward encoder-bench-echo reference_test})
do_build() {
  local limit=$(( $(remaining) - 150 ))
  [ "$limit" -lt 180 ] && limit=180
  run "$limit" cmake --build "$build" --parallel "$jobs" --target "${build_targets[@]}" ||
    return 1
  if ldd "$build/encoder-server" | grep -q 'not found'; then
    note "unresolved libraries"; ldd "$build/encoder-server" | grep 'not found'
    return 1
  fi
  ldd "$build/encoder-server" | grep -E 'libtorch_cuda|libc10_cuda' ||
    note "encoder-server does not link the CUDA LibTorch"
}

do_parity() {
  local rc log_file="$out/parity.log"
  [ -x "$build/tests/reference/reference_test" ] || { note "no tests/reference/reference_test"; return 1; }
  (cd "$build" && run 240 ctest -R "${CHECK_PARITY_REGEX:-^reference}" -j 8 --timeout 200 -V) > "$log_file" 2>&1
  rc=$?
  grep -E 'Test +#|tests passed|tests failed|\*\*\*Failed' "$log_file" | tail -n 40
  # Per test: the worst relative error of any case, and in float16 /
  # bfloat16 the largest ratio to PyTorch's own error (the bound's basis).
  "$json_python" - "$log_file" <<'EOF'
import re, sys
names, worst, ratio = {}, {}, {}
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"Test +#(\d+): (\S+)", line)
    if m:
        names[m.group(1)] = m.group(2)
    m = re.match(r"(\d+): \[reference\] .*worst relative error (\S+)", line)
    if m:
        worst[m.group(1)] = max(worst.get(m.group(1), 0.0), float(m.group(2)))
        r = re.search(r"ratio (\S+),", line)
        if r:
            ratio[m.group(1)] = max(ratio.get(m.group(1), 0.0), float(r.group(1)))
for k in sorted(worst, key=int):
    print("   %-26s worst relative error %.3g%s" % (
        names.get(k, "test " + k), worst[k],
        ", at most %.2fx PyTorch's own" % ratio[k] if k in ratio else ""))
EOF
  metric parity_tests "$(grep -cE 'Test +#[0-9]+: ' "$log_file")"
  metric parity_failed "$(grep -cE 'Test +#[0-9]+: .*(Failed|\*\*\*)' "$log_file")"
  metric parity_cuda_tests "$(grep -cE 'Test +#[0-9]+: reference_cuda_.*Passed' "$log_file")"
  metric parity_cpu_reduced_tests "$(grep -cE 'Test +#[0-9]+: reference_cpu_.*Passed' "$log_file")"
  local dt
  [ "$device" = cuda ] || return $rc
  for dt in float32 float16 bfloat16; do
    if grep -qE "reference_cuda_$dt .*Passed" "$log_file"; then
      metric "parity_cuda_${dt}_passed" 1
    else
      metric "parity_cuda_${dt}_passed" 0; rc=1
    fi
  done
  return $rc
}

do_e2e_start() {
  [ -x "$build/encoder-server" ] || { note "no encoder-server"; return 1; }
  start_server e2e --device="$device" --log-level=info
}

do_e2e_embed() {
  [ -n "$server_port" ] || { note "no server"; return 1; }
  local rc=0
  client 30 health || rc=1
  client 30 models > "$out/servers/e2e/models.json" || rc=1
  "$json_python" - "$out/servers/e2e/models.json" "$device" <<'EOF' || rc=1
import json, sys
models = json.load(open(sys.argv[1]))["models"]
on = [m["name"] for m in models if m["device"].startswith(sys.argv[2])]
print("   models on %s: %d of %d (%s)" % (sys.argv[2], len(on), len(models), ", ".join(on)))
sys.exit(0 if on and len(on) == len(models) else 1)
EOF
  client 30 embed --model rope --text "the cat sat on the mat" \
    > "$out/servers/e2e/embed.json" || rc=1
  client 30 embed --model alibi --ids 1,40,41,42,2 --attention-layers 0 \
    --average-heads > "$out/servers/e2e/embed_attention.json" || rc=1
  "$json_python" - "$out/servers/e2e/embed.json" <<'EOF' || rc=1
import json, math, sys
v = json.load(open(sys.argv[1]))["results"][0]["pooled"]
ok = len(v) > 0 and all(math.isfinite(x) for x in v)
print("   embed: %d values, finite: %s, first %s" % (len(v), ok, v[:3]))
sys.exit(0 if ok else 1)
EOF
  metric e2e_embed_ok $((1 - rc))
  return $rc
}

do_e2e_diagnose() {
  [ -n "$server_port" ] || { note "no server"; return 1; }
  client 60 diagnose --model sinusoidal --random-length 16 --seed 1 \
    > "$out/servers/e2e/diagnose.json" || return 1
  "$json_python" - "$out/servers/e2e/diagnose.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("   diagnose: keys", ", ".join(sorted(d)[:12]))
sys.exit(0 if d else 1)
EOF
}

do_e2e_python_client() {
  [ -n "$server_port" ] || { note "no server"; return 1; }
  # The protocol compiles at import with grpc_tools, else protoc (the
  # prefix's).
  PATH="$prefix/usr/bin:$PATH" PYTHONPATH="$repo/client/python" \
    timeout -k 5 90 "$python" - "$server_port" <<'EOF'
import sys
import numpy as np
from encoder_client import EncoderClient
with EncoderClient("127.0.0.1:%s" % sys.argv[1]) as client:
    vectors = client.embed(["a text", [1, 40, 41, 2]], model="rope")
    print("   python client embed:", vectors.shape, vectors.dtype,
          "finite:", bool(np.isfinite(vectors).all()))
    response, arrays = client.diagnose(text="a text", probes=["structure"],
                                       model="sinusoidal")
    print("   python client diagnose: %d arrays" % len(arrays))
    sys.exit(0 if vectors.shape[0] == 2 and np.isfinite(vectors).all() else 1)
EOF
}

# The same input on a CPU server with the same built-in weights: the GPU's
# float32 result matches (cosine >= 0.9999, max abs diff <= 1e-3).
do_e2e_cpu_match() {
  [ -n "$server_port" ] || { note "no server"; return 1; }
  local cuda_port="$server_port" cuda_pid="$server_pid" rc
  start_server e2e_cpu --device=cpu --log-level=warn || {
    server_pid="$cuda_pid"; server_port="$cuda_port"; return 1; }
  client 60 embed --model rope --text "the cat sat on the mat" \
    > "$out/servers/e2e_cpu/embed.json"
  rc=$?
  stop_server
  server_pid="$cuda_pid"; server_port="$cuda_port"
  [ "$rc" -eq 0 ] || return 1
  "$json_python" - "$out/servers/e2e/embed.json" "$out/servers/e2e_cpu/embed.json" "$out/metrics.tsv" <<'EOF'
import json, math, sys
a = json.load(open(sys.argv[1]))["results"][0]["pooled"]
b = json.load(open(sys.argv[2]))["results"][0]["pooled"]
diff = max(abs(x - y) for x, y in zip(a, b))
cos = sum(x * y for x, y in zip(a, b)) / math.sqrt(
    sum(x * x for x in a) * sum(y * y for y in b))
with open(sys.argv[3], "a") as f:
    f.write("e2e_cuda_vs_cpu_max_abs_diff\t%g\ne2e_cuda_vs_cpu_cosine\t%.9f\n" % (diff, cos))
print("   cuda vs cpu: max abs diff %.3g, cosine %.9f" % (diff, cos))
sys.exit(0 if len(a) == len(b) and cos >= 0.9999 and diff <= 1e-3 else 1)
EOF
}

do_e2e_stop() { stop_server; }

# A request whose attention alone needs far more than the GPU's memory:
# one 32768-token input, 64 heads, explicit attention products (the fused
# kernel would not need the [64, 32768, 32768] scores), admission limits
# lifted. It must fail with RESOURCE_EXHAUSTED ("device out of memory"),
# and a small request right after it must succeed.
do_oom() {
  [ -x "$build/encoder-server" ] || { note "no encoder-server"; return 1; }
  local budget="${CHECK_OOM_BUDGET_BYTES:-1125899906842624}"
  if [ "$device" != cuda ] && [ "$budget" -gt 1073741824 ]; then
    note "not on $device (it would try to allocate 256 GiB of host memory; CHECK_OOM_BUDGET_BYTES under 1 GiB tries the admission path)"
    return 0
  fi
  local dir="$out/servers/oom" rc=0 t0 t1 ids
  mkdir -p "$out/servers"
  cat > "$out/oom_repository.json" <<'EOF'
{"models": [{"name": "oom", "seed": 1,
  "config": {"d_model": 512, "num_heads": 64, "num_layers": 1, "d_ff": 512,
             "max_positions": 32768, "max_input_tokens": 32768,
             "positional": {"type": "none"}}}]}
EOF
  start_server oom --device="$device" --models "$out/oom_repository.json" \
    --no-fused-attention --max-batch-tokens=65536 --max-batch-sequences=1 \
    --batch-memory-budget-bytes="$budget" --log-level=info || return 1
  ids="$(printf '5,%.0s' $(seq 32767))5"
  t0=$(date +%s.%N)
  say "   \$ encoder-client embed --model oom --ids <32768 ids>"
  timeout -k 5 120 "$build/encoder-client" embed --target "127.0.0.1:$server_port" \
    --model oom --ids "$ids" --deadline-ms 100000 > "$dir/big.out" 2> "$dir/big.err"
  local big_rc=$?
  t1=$(date +%s.%N)
  say "   rc=$big_rc: $(head -c 400 "$dir/big.err")"
  metric oom_request_seconds "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')"
  if grep -q 'RESOURCE_EXHAUSTED' "$dir/big.err"; then
    metric oom_resource_exhausted 1
    if grep -qi 'out of memory' "$dir/big.err"; then
      metric oom_device_oom 1
    else
      # Refused before it ran: admission, not the allocator.
      metric oom_device_oom 0
      note "admission answered RESOURCE_EXHAUSTED before the GPU ran out"
    fi
  else
    metric oom_resource_exhausted 0
    note "the oversized request did not fail with RESOURCE_EXHAUSTED"
    rc=1
  fi
  if kill -0 "$server_pid" 2>/dev/null; then
    metric oom_server_alive 1
  else
    metric oom_server_alive 0; note "server died"; rc=1
  fi
  if client 30 embed --model oom --ids 1,2,3,4,5,6,7,8 > "$dir/small.out" &&
     client 30 health; then
    metric oom_followup_ok 1
  else
    metric oom_followup_ok 0; note "no Embed after the out-of-memory batch"; rc=1
  fi
  grep -iE 'out of memory|RESOURCE_EXHAUSTED' "$dir/server.log" | head -n 3 | cut -c1-300
  stop_server
  return $rc
}

# One benchmark cell: the server at 32 callers for DTYPE and LENGTH; a
# third argument, a server flag, makes it a variant (bench/server_DTYPE_
# LLENGTH_FLAG.json, which check.json's "bench" leaves out).
do_bench_server() {
  local dt="$1" len="$2" rc variant="" extra=()
  if [ $# -ge 3 ]; then
    extra=("$3"); variant="_$(printf '%s' "$3" | tr -c 'a-z0-9\n' '_' | sed 's/^_*//')"
  fi
  local file="$out/bench/server_${dt}_L${len}${variant}.json"
  [ -x "$build/encoder-server" ] || return 1
  cat > "$out/bench_repository.json" <<'EOF'
{"models": [{"name": "bench", "seed": 1,
  "config": {"positional": {"type": "sinusoidal"}}}]}
EOF
  start_server "bench_$dt$variant" --device="$device" --dtype="$dt" \
    --models "$out/bench_repository.json" --log-level=warn "${extra[@]}" || return 1
  client 60 bench --model bench --concurrency 32 --length "$len" \
    --duration-s "$bench_s" --warmup-requests 64 --json > "$file"
  rc=$?
  stop_server
  [ "$rc" -eq 0 ] || { rm -f "$file"; return 1; }
  "$json_python" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("   %.0f tok/s, %.0f seq/s, p50 %.2f ms, p99 %.2f ms, mean batch %.1f, failed %d" % (d["throughput"]["tokens_per_s"], d["throughput"]["sequences_per_s"], d["latency_ms"]["p50"], d["latency_ms"]["p99"], d["batch_size"]["mean"], d["failed_requests"]))' "$file"
}

# encoder-bench-forward and PyTorch eager on the same weights
# (tests/bench/eager_bench.py).
do_bench_eager() {
  local dt="$1" len="$2"
  [ -x "$build/encoder-bench-forward" ] || return 1
  run 120 "$python" "$repo/tests/bench/eager_bench.py" "$build" --device "$device" \
    --dtype "$dt" --batch-sizes "$bench_batches" --length "$len" \
    --seconds "$bench_s" --json "$out/bench/eager_${dt}_L${len}.json"
}

# The bf16 matrix-product rate of this GPU, which the forward's rate is
# held against (scripts/gpu/goals.py).
do_matmul_rate() {
  run 60 "$python" "$repo/scripts/gpu/goals.py" matmul --device "$device" \
    --dtype bfloat16 --json "$out/matmul_bf16.json"
}

# The per-request path (tests/bench/request_path_bench.py): a model of one
# layer of width 32 at 32 callers, one token per request, so that the GPU
# does next to nothing: requests/s, the server's CPU microseconds per
# request and its busiest threads; on the GPU with 1, 2 and 4 batches of
# the model running at once (--executions-per-model), then on the CPU;
# and gRPC's own echo server under the same load (encoder-bench-echo), the
# transport's ceiling on this host.
do_request_path() {
  local variants=()
  if [ "$device" = cuda ]; then
    variants=(--variant cuda=ENCODER_DEVICE=cuda
      --variant cuda_x2=ENCODER_DEVICE=cuda,ENCODER_EXECUTIONS_PER_MODEL=2
      --variant cuda_x4=ENCODER_DEVICE=cuda,ENCODER_EXECUTIONS_PER_MODEL=4
      --variant cpu=ENCODER_DEVICE=cpu)
  else
    variants=(--variant cpu=ENCODER_DEVICE=cpu
      --variant cpu_x1=ENCODER_DEVICE=cpu,ENCODER_EXECUTIONS_PER_MODEL=1)
  fi
  run 150 "$python" "$repo/tests/bench/request_path_bench.py" --build "$build" \
    --rounds 1 --seconds "${CHECK_REQUEST_PATH_SECONDS:-3}" "${variants[@]}" --echo \
    --json "$out/request_path.json" || return 1
  local line
  while IFS= read -r line; do
    metric "${line%%=*}" "${line#*=}"
  done < <("$json_python" - "$out/request_path.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for v in d["variants"]:
    n = "request_path_" + v["name"]
    print("%s_requests_per_s=%.0f" % (n, v["requests/s"]))
    print("%s_server_cpu_us_per_request=%.1f" % (n, v["server CPU us/request"]))
    print("%s_p99_ms=%.2f" % (n, v["p99 ms"]))
    print("%s_busiest_threads=%s" % (n, ", ".join(
        "%s %.0f%%" % (t["name"], t["percent_of_core"])
        for t in v["busiest_threads"][:4])))
EOF
)
}

# The per-request path's scaling with the server's cores: the same load
# (the server's default device), with the client pinned to cores 2 and up
# and the server to core 0, then to cores 0-1, over gRPC and over HTTP
# (tests/bench/http_load.py); the ratio of 2 to 1 cores (goal >= 1.8).
# Needs 4 cores or more.
do_request_path_cores() {
  local cores front n
  cores=$(nproc)
  if [ "$cores" -lt 4 ]; then
    note "$cores cores: the client needs cores of its own beside 2 for the server"
    return 0
  fi
  for front in grpc http; do
    for n in 1 2; do
      run 120 "$python" "$repo/tests/bench/request_path_bench.py" --build "$build" \
        --front "$front" --rounds 1 --seconds "${CHECK_REQUEST_PATH_SECONDS:-3}" \
        --server-cpus "0-$((n - 1))" --client-cpus "2-$((cores - 1))" \
        --json "$out/request_path_${front}_cores$n.json" || return 1
    done
  done
  local line
  while IFS= read -r line; do
    metric "${line%%=*}" "${line#*=}"
  done < <("$json_python" - "$out" <<'EOF'
import json, sys
for front in ("grpc", "http"):
    rate = {}
    for n in (1, 2):
        d = json.load(open("%s/request_path_%s_cores%d.json" % (sys.argv[1], front, n)))
        v = d["variants"][0]
        rate[n] = v["requests/s"]
        key = "request_path_%s_cores%d" % (front, n)
        print("%s_requests_per_s=%.0f" % (key, v["requests/s"]))
        print("%s_server_cpu_us_per_request=%.1f" % (key, v["server CPU us/request"]))
    print("request_path_%s_cores_2_to_1=%.2f" % (front, rate[2] / rate[1]))
EOF
)
}

# ------------------------------------------------------------------- main
if [ "$configure_only" = 1 ]; then mode=configure-only; else mode=gpu; fi
json_python="$(command -v python3 || command -v "$python")"
say "check.sh ($mode): bundle $bundle, prefix $prefix, build $build, output $out"
say "time limit $time_limit s, $jobs jobs, strict $strict"

step env 0 do_env
step unpack 0 do_unpack
# For the build, ctest and the programs: the bundle's libraries; the
# prefix's pkg-config files only.
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PKG_CONFIG_LIBDIR="$libdir/pkgconfig:$prefix/usr/lib/pkgconfig:$prefix/usr/share/pkgconfig"
export PKG_CONFIG_PATH=""
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # CMake 4 and old package configs
step fixup 0 do_fixup
step configure 0 do_configure
step verify_prefix 0 do_verify_prefix

if [ "$configure_only" = 0 ]; then
  step build 0 do_build
  step parity 0 do_parity
  step e2e_start 0 do_e2e_start
  step e2e_embed 0 do_e2e_embed
  step e2e_diagnose 0 do_e2e_diagnose
  step e2e_python_client 20 do_e2e_python_client
  step e2e_cpu_match 30 do_e2e_cpu_match
  step e2e_stop 0 do_e2e_stop
  step oom 30 do_oom
  step matmul_rate 20 do_matmul_rate
  step request_path 40 do_request_path
  step request_path_cores 60 do_request_path_cores

  case "${CHECK_BENCH:-reduced}" in
    full) lengths_default="16 128 512" ;;
    none) lengths_default="" ;;
    *) lengths_default="128" ;;
  esac
  bench_dtypes="${CHECK_BENCH_DTYPES:-float32 bfloat16 float16}"
  bench_lengths="${CHECK_BENCH_LENGTHS:-$lengths_default}"
  bench_batches="${CHECK_BENCH_BATCHES:-1,32,128}"
  [ "${CHECK_BENCH:-reduced}" = none ] && bench_dtypes=""
  # Length-major: every dtype at 128 tokens before any other length.
  ordered_lengths=""
  for len in $bench_lengths; do
    [ "$len" = 128 ] && ordered_lengths="128 $ordered_lengths" || ordered_lengths="$ordered_lengths $len"
  done
  # A 1-token call at 32 callers (the latency goal), then the grid.
  [ -n "$bench_dtypes" ] && step bench_server_float32_L1 25 do_bench_server float32 1
  for len in $ordered_lengths; do
    for dt in $bench_dtypes; do
      step "bench_server_${dt}_L$len" 25 do_bench_server "$dt" "$len"
      step "bench_eager_${dt}_L$len" 30 do_bench_eager "$dt" "$len"
    done
  done
  # The half-precision servers again with cuDNN's attention allowed (off by
  # default), to see what the fused kernel's choice costs.
  for dt in $bench_dtypes; do
    [ "$dt" = float32 ] && continue
    case " $bench_lengths " in *" 128 "*) ;; *) continue ;; esac
    step "bench_server_${dt}_L128_cudnn" 25 do_bench_server "$dt" 128 --cudnn-attention
  done
fi

stop_server
write_json
if [ "$configure_only" = 0 ]; then
  "$json_python" "$repo/scripts/gpu/goals.py" evaluate "$out/check.json" \
    --matmul "$out/matmul_bf16.json" || say "goals.py evaluate failed"
fi
say ""
say "== summary ($mode, $(elapsed) s)"
"$json_python" - "$out/check.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("gpu: %s" % d["gpu_name"])
for s in d["steps"]:
    state = "skipped" if s["skipped"] else ("ok" if s["rc"] == 0 else "FAILED rc=%d" % s["rc"])
    print("  %-28s %-14s %7.1f s  %s" % (s["name"], state, s["seconds"], s["note"]))
if d["bench"]:
    print("benchmark (tokens/s):")
    print("  %-18s %-9s %6s %6s %14s" % ("kind", "dtype", "length", "batch", "tokens/s"))
    for r in d["bench"]:
        print("  %-18s %-9s %6d %6s %14.0f" % (r["kind"], r["dtype"], r["length"],
              r.get("batch", "32c"), r["tokens_per_s"]))
print("%d steps failed, %d skipped; %s" % (d["steps_failed"], d["steps_skipped"],
      "check.json and check.log in the output directory"))
EOF
failed="$("$json_python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps_failed"])' "$out/check.json" 2>/dev/null || echo 1)"
[ "$failed" = 0 ]
