#!/usr/bin/env bash
# Downloads (apt-get download: nothing is installed) the Debian bookworm
# .deb files that a GPU host without network lacks to build and run this
# server: gRPC, protobuf, abseil, prometheus-cpp, ICU, PCRE2, Boost (Asio
# and Beast headers), spdlog, fmt, CLI11, nlohmann-json, GoogleTest/GoogleMock
# and the runtime libraries they link. scripts/gpu/check.sh unpacks them on the host
# (dpkg -x into a prefix) and builds against them. The conventional DIR is
# the ignored .gpu-bundle/ of the repository, which travels with it.
#
# Usage: bundle.sh [--update] [--max-mib N] DIR
#   --update    run apt-get update first (default: only when apt knows no
#               download URI for libgrpc++-dev: no package lists)
#   --max-mib   size limit of all .debs together (default 40: the bundle
#               and the repository travel in one 64 MiB working tree)
# Writes DIR/*.deb and DIR/MANIFEST (package=version, bytes, why), removes
# other .debs from DIR, prints the total and exits 1 over the limit.
# Exit 3: apt cannot reach its repositories (no candidate, failed download).
#
# Which packages: the build and runtime lists of scripts/install_deps.sh
# (less what the host brings itself: LibTorch, the toolchain, CMake, ninja,
# git, SentencePiece, which is optional) plus libgtest-dev/libgmock-dev, and
# then their Depends, recursively, except
#   - HOST: what any x86-64 Ubuntu 24.04 with a compiler has (glibc and its
#     -dev, libstdc++, libgcc; Debian's names): not downloaded, not followed;
#   - LEAF: downloaded, their own Depends not followed: libcurl4 and its
#     -dev, which only prometheus-cpp's CMake config looks up (find_package
#     (CURL) for its push library, which nothing here links), so curl's
#     runtime (Kerberos, LDAP, GnuTLS, ...) is never loaded;
#   - HOST_RUNTIME: runtime libraries the host has under the same SONAME
#     (Ubuntu 24.04: libssl3t64's libssl.so.3, which its Python 3.12
#     needs, and zlib1g's libz.so.1): not downloaded; their -dev packages
#     are, and check.sh points the dangling libfoo.so links at the host's;
#   - SKIP: not needed at all: googletest's and catch2's sources, ICU's
#     command-line tools, PCRE2's 16/32-bit and POSIX libraries and
#     libprotobuf-lite (nothing links them; their -dev links dangle).
# Then every ELF file of the bundle has its NEEDED entries checked against
# what the bundle provides plus ASSUMED_HOST_SONAMES (LEAF packages apart);
# a missing library fails the run (readelf from binutils; skipped with a
# note where there is none).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

update=auto
max_mib=40
while [ $# -gt 0 ]; do
  case "$1" in
    --update) update=yes; shift ;;
    --max-mib) max_mib="$2"; shift 2 ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bundle.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ]; then
  echo "usage: bundle.sh [--update] [--max-mib N] DIR" >&2
  exit 2
fi
dir="$1"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# The package lists of install_deps.sh, read from it (so that a package
# added there is bundled too).
eval "$(sed -n '/^runtime_pkgs=(/,/)$/p; /^build_pkgs=(/,/)$/p' \
  "$repo/scripts/install_deps.sh")"
if [ "${#runtime_pkgs[@]}" -eq 0 ] || [ "${#build_pkgs[@]}" -eq 0 ]; then
  echo "bundle.sh: could not read the package lists of install_deps.sh" >&2
  exit 1
fi
# install_deps.sh's packages that the GPU host brings (or that are optional).
not_bundled=" python3-pip build-essential
  cmake ninja-build git libsentencepiece0 libsentencepiece-dev
  ca-certificates "
HOST=" libc6 libc6-dev libc-dev-bin linux-libc-dev libcrypt1 libcrypt-dev
  libnsl2 libnsl-dev libtirpc3 libtirpc-dev libtirpc-common rpcsvc-proto
  gcc-12-base libgcc-s1 libstdc++6 libstdc++-12-dev debconf "
LEAF=" libcurl4 libcurl4-openssl-dev "
HOST_RUNTIME=" libssl3 zlib1g "
SKIP=" googletest catch2 icu-devtools libpcre2-16-0 libpcre2-32-0
  libpcre2-posix3 libprotobuf-lite32 "
# Libraries the host has: glibc, the compiler's runtime, HOST_RUNTIME's.
ASSUMED_HOST_SONAMES=" libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0
  librt.so.1 ld-linux-x86-64.so.2 libstdc++.so.6 libgcc_s.so.1
  libresolv.so.2 libutil.so.1 libanl.so.1 libssl.so.3 libcrypto.so.3
  libz.so.1 "

# " a b c " from a list spread over lines, for `case "$set" in *" $x "*)`.
words() { echo " $(echo $*) "; }
not_bundled="$(words "$not_bundled")"; HOST="$(words "$HOST")"
LEAF="$(words "$LEAF")"; SKIP="$(words "$SKIP")"
HOST_RUNTIME="$(words "$HOST_RUNTIME")"
ASSUMED_HOST_SONAMES="$(words "$ASSUMED_HOST_SONAMES")"

roots=()
for p in "${runtime_pkgs[@]}" "${build_pkgs[@]}" libgtest-dev libgmock-dev; do
  case "$not_bundled$HOST_RUNTIME$SKIP" in *" $p "*) continue ;; esac
  roots+=("$p")
done

export DEBIAN_FRONTEND=noninteractive
if [ "$update" = auto ]; then
  # Without package lists (a fresh container) apt knows no download URI.
  if apt-get download --print-uris libgrpc++-dev > /dev/null 2>&1; then
    update=no
  else
    update=yes
  fi
fi
if [ "$update" = yes ]; then
  echo "bundle.sh: apt-get update"
  if ! apt-get update -q; then
    echo "bundle.sh: apt-get update failed (no network?)" >&2
    exit 3
  fi
fi

# Depends, recursively (first alternative of each group; a virtual package
# resolves to its first provider), one apt-cache call per level.
declare -A seen=() why=()
level=()
for p in "${roots[@]}"; do
  seen[$p]=1; why[$p]="install_deps.sh"; level+=("$p")
done
# install_deps.sh's build list has no GoogleTest.
why[libgtest-dev]="tests"; why[libgmock-dev]="tests"
while [ "${#level[@]}" -gt 0 ]; do
  follow=()
  for p in "${level[@]}"; do
    case "$LEAF" in *" $p "*) ;; *) follow+=("$p") ;; esac
  done
  level=()
  [ "${#follow[@]}" -eq 0 ] && break
  out="$(apt-cache depends --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "${follow[@]}" 2>/dev/null)" || true
  # A block per package: its name alone on a line, then "  Depends: x",
  # " |Depends: a" (an alternative follows), "  Depends: <virtual>" and
  # "    provider" lines. Prints "pkg" for each block and "pkg dep" pairs.
  pairs="$(awk '
    /^[^ ]/ { pkg = $1; skipalt = 0; virt = 0; print pkg; next }
    /^ *\|?(Pre)?Depends: / {
      alt = ($1 ~ /^\|/); name = $2
      if (skipalt) { skipalt = alt; virt = 0; next }
      skipalt = alt
      if (name ~ /^</) { virt = 1; next }
      virt = 0; print pkg, name; next
    }
    /^    / { if (virt) { print pkg, $1; virt = 0 } next }
  ' <<< "$out" | sed 's/:any$//')"
  for p in "${follow[@]}"; do
    if ! grep -qx -- "$p" <<< "$pairs"; then
      echo "bundle.sh: apt knows no package $p (apt-get update, or no network?)" >&2
      exit 3
    fi
  done
  while read -r p d; do
    [ -z "$d" ] && continue
    [ -n "${seen[$d]:-}" ] && continue
    case "$HOST$HOST_RUNTIME$SKIP" in *" $d "*) continue ;; esac
    seen[$d]=1; why[$d]="dep of $p"; level+=("$d")
  done <<< "$pairs"
done
pkgs=("${!seen[@]}")
IFS=$'\n' pkgs=($(printf '%s\n' "${pkgs[@]}" | sort)); unset IFS
echo "bundle.sh: ${#pkgs[@]} packages (${#roots[@]} from install_deps.sh and tests, the rest their dependencies)"

# Download into a staging directory, then replace DIR's .debs.
stage="$(mktemp -d "$dir/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
(cd "$stage" && apt-get download -q "${pkgs[@]}" 2>&1) |
  grep -v -e 'unsandboxed as root' -e '^Get:' || true
got="$(find "$stage" -name '*.deb' | wc -l)"
if [ "$got" -ne "${#pkgs[@]}" ]; then
  echo "bundle.sh: apt-get download got $got of ${#pkgs[@]} packages" >&2
  exit 3
fi

# Slimming, by repacking .debs (their control data kept; MANIFEST marks them
# "trimmed"):
#   - static archives (lib*.a) whose shared library (lib*.so) is in the
#     bundle too: everything here links shared, and ICU's, gRPC's and
#     OpenSSL's archives alone are about 14 MiB compressed; GoogleTest's,
#     which have no shared twin, stay;
#   - libboost1.74-dev: only the header libraries that Boost.Asio and
#     Boost.Beast reach (their #include lines followed to whole library
#     directories, so that includes computed by macros are there too), and
#     Boost's CMake config: about 1.7 MiB instead of 9.1.
declare -A trimmed=()
repack() {  # repack DEB: drop the files listed on stdin (paths as in the .deb)
  local deb="$1" root
  root="$(mktemp -d "$stage/.repack.XXXXXX")"
  dpkg-deb -R "$deb" "$root"
  while IFS= read -r f; do rm -f "$root/$f"; done
  if [ -f "$root/DEBIAN/md5sums" ]; then
    (cd "$root" && find . -path ./DEBIAN -prune -o -type f -print |
      sed 's|^\./||' | sort > "$root/.keep")
    awk 'NR == FNR {keep[$0] = 1; next} ($2 in keep)' "$root/.keep" \
      "$root/DEBIAN/md5sums" > "$root/.md5" && mv "$root/.md5" "$root/DEBIAN/md5sums"
    rm -f "$root/.keep"
  fi
  dpkg-deb -Zxz --root-owner-group -b "$root" "$deb.new" > /dev/null
  mv "$deb.new" "$deb"
  rm -rf "$root"
}
shared_libs=" $(for f in "$stage"/*.deb; do dpkg-deb -c "$f"; done |
  awk '{print $6}' | sed -n 's|.*/\(lib[^/]*\)\.so$|\1|p' | sort -u | tr '\n' ' ') "
for f in "$stage"/*.deb; do
  p="$(dpkg-deb -f "$f" Package)"
  drop="$(dpkg-deb -c "$f" | awk '{print $6}' | { grep -E '/lib[^/]*\.a$' || true; } |
    while read -r a; do
      b="$(basename "$a" .a)"
      case "$shared_libs" in *" $b "*) echo "$a" ;; esac
    done)"
  [ -z "$drop" ] && continue
  repack "$f" <<< "$drop"
  trimmed[$p]="static archives"
done
boost="$(compgen -G "$stage/libboost1.74-dev_*.deb" | head -n1 || true)"
if [ -n "$boost" ]; then
  bx="$(mktemp -d "$stage/.boost.XXXXXX")"
  dpkg-deb -x "$boost" "$bx"
  keep="$(python3 - "$bx/usr/include" <<'PY'
import os, re, sys
root = sys.argv[1]
include = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
todo = ["boost/asio.hpp", "boost/asio/ssl.hpp", "boost/beast.hpp",
        "boost/beast/ssl.hpp", "boost/version.hpp"]
seen, libraries = set(), set()
while todo:
    f = os.path.normpath(todo.pop())
    if f in seen or not os.path.isfile(os.path.join(root, f)):
        continue
    seen.add(f)
    parts = f.split("/")
    libraries.add(parts[1] if len(parts) > 2 else parts[1].split(".")[0])
    text = open(os.path.join(root, f), errors="replace").read()
    for m in include.finditer(text):
        name = m.group(1)
        todo.append(name if name.startswith("boost/")
                    else os.path.join(os.path.dirname(f), name))
for lib in sorted(libraries):
    print(lib)
PY
)"
  [ -n "$keep" ] || { echo "bundle.sh: found no Boost headers to keep" >&2; exit 1; }
  drop="$(cd "$bx" && find usr/include/boost -mindepth 1 -maxdepth 1 | while read -r e; do
    n="$(basename "$e")"; n="${n%.hpp}"; n="${n%.h}"
    grep -qx -- "$n" <<< "$keep" || find "$e" \( -type f -o -type l \) | sed 's|^|./|'
  done; find usr/share -type f | sed 's|^|./|')"
  rm -rf "$bx"
  repack "$boost" <<< "$drop"
  trimmed[libboost1.74-dev]="Asio and Beast headers"
fi
rm -f "$dir"/*.deb
mv "$stage"/*.deb "$dir/"

# The manifest.
manifest="$dir/MANIFEST"
total=0
{
  echo "# Debian bookworm packages for scripts/gpu/check.sh, by scripts/gpu/bundle.sh"
  echo "# package=version bytes why"
  for p in "${pkgs[@]}"; do
    f="$(compgen -G "$dir/${p}_*.deb" | head -n1)"
    v="$(dpkg-deb -f "$f" Version)"
    s="$(stat -c %s "$f")"
    total=$((total + s))
    note="${why[$p]}"
    [ -n "${trimmed[$p]:-}" ] && note+=" (trimmed: ${trimmed[$p]})"
    printf '%s=%s %d %s\n' "$p" "$v" "$s" "$note"
  done
  printf '# total %d bytes (%.1f MiB), %d packages\n' "$total" \
    "$(awk -v t="$total" 'BEGIN {print t / 1048576}')" "${#pkgs[@]}"
} > "$manifest"
echo "largest:"
grep -v '^#' "$manifest" | sort -k2 -n -r |
  awk 'NR <= 8 {printf "  %-44s %9d bytes\n", $1, $2}'

# NEEDED entries of every ELF file against what the bundle provides.
if command -v readelf >/dev/null 2>&1; then
  x="$(mktemp -d)"
  trap 'rm -rf "$stage" "$x"' EXIT
  for f in "$dir"/*.deb; do
    p="$(dpkg-deb -f "$f" Package)"
    case "$LEAF" in *" $p "*) dest="$x/leaf" ;; *) dest="$x/main" ;; esac
    dpkg-deb -x "$f" "$dest"
  done
  provided=" $(find "$x" -name 'lib*.so*' \( -type f -o -type l \) -printf '%f ' ) "
  missing=""
  while IFS= read -r -d '' f; do
    head -c 4 "$f" 2>/dev/null | grep -q 'ELF' || continue
    for n in $(readelf -d "$f" 2>/dev/null |
               sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      case "$provided$ASSUMED_HOST_SONAMES" in *" $n "*) continue ;; esac
      missing+="  ${f#"$x/main"} needs $n"$'\n'
    done
  done < <(find "$x/main" -type f \( -name '*.so*' -o -path '*/bin/*' \) -print0)
  if [ -n "$missing" ]; then
    printf 'bundle.sh: libraries neither in the bundle nor assumed on the host:\n%s' "$missing" >&2
    exit 1
  fi
  echo "bundle.sh: every NEEDED entry of the bundle's programs and libraries is in the bundle or assumed on the host"
else
  echo "bundle.sh: no readelf (binutils): NEEDED entries not checked"
fi

mib="$(awk -v t="$total" 'BEGIN {printf "%.1f", t / 1048576}')"
echo "bundle.sh: total $total bytes ($mib MiB) in ${#pkgs[@]} packages, limit $max_mib MiB: $dir"
if [ "$total" -gt $((max_mib * 1048576)) ]; then
  echo "bundle.sh: over the limit of $max_mib MiB" >&2
  exit 1
fi
