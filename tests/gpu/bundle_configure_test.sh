#!/usr/bin/env bash
# gpu_bundle_configure (tests/gpu/CMakeLists.txt): bundle.sh into a
# temporary directory, its size limit and manifest, then check.sh
# --configure-only against that bundle alone (must pass, every package
# found in the prefix) and against the bundle less libcli11-dev (must
# fail: the configure does not fall back to this machine's /usr).
# Usage: bundle_configure_test.sh SOURCE_DIR TORCH_WHEEL_DIR
# Exit 77 (SKIP): no apt, apt repositories unreachable, or no wheel.
set -uo pipefail
src="$1"
wheel="${2:-}"
limit_mib=40
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 )); }
fail() { echo "FAIL: $*"; exit 1; }

if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  echo "SKIP: no apt-get/dpkg (not a Debian machine)"; exit 77
fi
if [ -z "$wheel" ] || [ ! -d "$wheel/include/torch" ]; then
  echo "SKIP: no torch wheel with LibTorch headers ('$wheel'); set ENCODER_GPU_CHECK_TORCH_WHEEL"
  exit 77
fi
tmp="$(mktemp -d /tmp/gpu-bundle-test.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

echo "== bundle.sh $tmp/bundle"
bash "$src/scripts/gpu/bundle.sh" --max-mib "$limit_mib" "$tmp/bundle"
rc=$?
if [ "$rc" -eq 3 ]; then
  echo "SKIP: apt repositories unreachable (bundle.sh exit 3)"; exit 77
fi
[ "$rc" -eq 0 ] || fail "bundle.sh exit $rc"
echo "bundle: $(elapsed) s"

# Size and manifest.
total=$(du -cb "$tmp"/bundle/*.deb | tail -n1 | cut -f1)
count=$(ls "$tmp"/bundle/*.deb | wc -l)
echo "bundle: $count .debs, $total bytes ($(awk -v t="$total" 'BEGIN {printf "%.1f", t / 1048576}') MiB), limit $limit_mib MiB"
[ "$total" -le $((limit_mib * 1048576)) ] || fail "bundle over $limit_mib MiB"
manifest="$tmp/bundle/MANIFEST"
[ -s "$manifest" ] || fail "no MANIFEST"
[ "$(grep -vc '^#' "$manifest")" -eq "$count" ] || fail "MANIFEST lists $(grep -vc '^#' "$manifest") packages, $count .debs"
manifest_total=$(grep -v '^#' "$manifest" | awk '{s += $2} END {print s}')
[ "$manifest_total" -eq "$total" ] || fail "MANIFEST total $manifest_total != $total"
for p in libgrpc++-dev libgrpc-dev protobuf-compiler-grpc libgrpc++1.51 libgrpc29 \
    libprotobuf-dev protobuf-compiler libprotoc32 libprotobuf32 libabsl-dev \
    libabsl20220623 prometheus-cpp-dev libprometheus-cpp-core1.0 \
    libprometheus-cpp-pull1.0 libicu-dev libicu72 libpcre2-dev libpcre2-8-0 \
    libboost1.74-dev libspdlog-dev libspdlog1.10 \
    libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev libgtest-dev \
    libgmock-dev libc-ares2 libre2-9 libssl-dev zlib1g-dev; do
  grep -q "^$p=" "$manifest" || fail "$p not in the bundle"
done

# The unpack-and-configure half of check.sh, against the bundle alone.
echo "== check.sh --configure-only"
bash "$src/scripts/gpu/check.sh" --configure-only --torch-wheel "$wheel" \
  --prefix "$tmp/prefix" --build-dir "$tmp/build" "$tmp/bundle" "$tmp/out"
rc=$?
[ -s "$tmp/out/check.json" ] || fail "no check.json"
python3 - "$tmp/out/check.json" <<'PY' || fail "check.json"
import json, sys
d = json.load(open(sys.argv[1]))
steps = {s["name"]: s for s in d["steps"]}
for name in ("unpack", "fixup", "configure", "verify_prefix"):
    assert name in steps and steps[name]["rc"] == 0, (name, steps.get(name))
m = d["metrics"]
assert m["prefix_packages_bad"] == 0 and m["prefix_packages_found"] >= 20, m
print("check.json: %d steps ok, %d package entries in the prefix"
      % (len(steps), m["prefix_packages_found"]))
PY
[ "$rc" -eq 0 ] || fail "check.sh --configure-only exit $rc"
echo "configure-only: $(elapsed) s"

# The bundle's Boost is trimmed to what Asio and Beast include: the HTTP
# server's sources preprocess against it (every header found), and no Boost
# header comes from this machine's /usr/include, which the compiler would
# search after the prefix.
echo "== the HTTP server's Boost headers, from the prefix"
inside=0
for unit in http_session http_server; do
  cmd="$(cd "$tmp/build" && ninja -t commands \
    "server/transport/CMakeFiles/encoder_http_server.dir/$unit.cc.o" | tail -n1)"
  [ -n "$cmd" ] || fail "no compile command for $unit.cc"
  cmd="$(sed -E 's/ -MD -MT [^ ]+ -MF [^ ]+//; s/ -o [^ ]+ -c / -M /' <<< "$cmd")"
  deps="$(cd "$tmp/build" && eval "$cmd" 2> "$tmp/deps.err")" ||
    { cat "$tmp/deps.err"; fail "$unit.cc does not preprocess against the bundle"; }
  deps="$(tr ' \\' '\n\n' <<< "$deps" | grep '/boost/' || true)"
  outside="$(grep -E '^/usr/include/boost/' <<< "$deps" | head -n 3 || true)"
  [ -z "$outside" ] || fail "$unit.cc reads Boost from /usr/include, not the bundle: $outside"
  inside=$((inside + $(grep -c . <<< "$deps")))
done
[ "$inside" -gt 200 ] || fail "only $inside Boost headers in the HTTP server's dependencies"
echo "HTTP server: $inside Boost header uses, all from the bundle ($(elapsed) s)"

# Without libcli11-dev the same configure must fail, though this machine
# has CLI11 in /usr: the prefix alone is searched.
echo "== check.sh --configure-only, bundle less libcli11-dev (must fail)"
mkdir -p "$tmp/partial"
for f in "$tmp"/bundle/*.deb; do
  case "$(basename "$f")" in libcli11-dev_*) continue ;; esac
  ln -s "$f" "$tmp/partial/"
done
bash "$src/scripts/gpu/check.sh" --configure-only --torch-wheel "$wheel" \
  --prefix "$tmp/prefix" --build-dir "$tmp/build-partial" "$tmp/partial" \
  "$tmp/out-partial" > "$tmp/partial.log" 2>&1
rc=$?
grep -E '^-- (configure|verify_prefix):|CLI11' "$tmp/partial.log" | head -n 8
[ "$rc" -ne 0 ] || fail "configure passed without libcli11-dev in the bundle"
python3 -c 'import json,sys; s={x["name"]: x["rc"] for x in json.load(open(sys.argv[1]))["steps"]}; sys.exit(0 if s["configure"] != 0 else 1)' \
  "$tmp/out-partial/check.json" || fail "the configure step did not fail without libcli11-dev"
echo "PASS: bundle $count packages, $total bytes; configured against the prefix alone; a missing package fails ($(elapsed) s)"
