#!/usr/bin/env bash
# Compiles and links the project with CUDA: against the CUDA LibTorch inside
# the PyPI torch wheel of .venv (scripts/python_env.sh), with NVIDIA's
# compiler pieces from PyPI. Needs no GPU: the result is only built here, to
# run on a CUDA machine.
#
# The wheel's CMake config (find_package(Torch)) wants a CUDA toolkit: nvcc,
# whose version it checks against the toolkit's, the runtime headers and
# libcudart/libnvrtc under unversioned names. This script assembles one in
# .cuda-toolkit/root (ignored by git):
#   - nvidia-cuda-nvcc, nvidia-cuda-crt and nvidia-nvvm wheels (bin/nvcc,
#     ptxas, cicc, crt/ headers, libnvvm), downloaded once into
#     .cuda-toolkit/wheels, at the version of the venv's nvidia-cuda-runtime
#     (the CUDA that torch was built with) and unpacked as real files, so
#     that nvcc.profile finds its siblings;
#   - links to the venv's nvidia/cu13/include entries (runtime, cccl, cublas,
#     nvrtc ... headers) and nvidia/cu13/lib libraries, plus unversioned
#     libfoo.so links to them (the wheels carry only libfoo.so.N).
# No libcuda.so (driver) stub: no library that the project links needs
# libcuda.so.1 (LibTorch loads the driver at run time), and the config only
# names CUDA::cuda_driver in targets nothing links.
# Then it configures BUILD_DIR with that toolkit and builds the server, the
# forward benchmark and the reference test (the GPU tests run it), and shows
# with ldd that the server links libtorch_cuda and libc10_cuda.
#
# Usage: cuda_build.sh [BUILD_DIR]          (default build-cuda)
#   CUDA_BUILD_JOBS     parallel compile jobs (default: nproc)
#   CUDA_BUILD_TARGETS  targets to build (default: encoder-server
#                       encoder-bench-forward reference_test)
#   CUDA_ARCH           GPU architecture (default 9.0: H100/H200)
#   CUDA_PKG_VERSION    version of the nvcc/crt/nvvm wheels (default: that
#                       of the venv's nvidia-cuda-runtime)
#   CUDA_PYTHON         a Python whose torch is the CUDA wheel (default
#                       .venv/bin/python; deploy/Dockerfile.cuda's has only
#                       torch and its CUDA runtime wheels)
# On a shared machine: CUDA_BUILD_JOBS=1 nice -n 19 scripts/cuda_build.sh
# Idempotent: downloads and assembles only what is missing, re-runs the
# configure (quick on an existing build directory) and ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$(pwd)"
build="${1:-build-cuda}"
jobs="${CUDA_BUILD_JOBS:-$(nproc)}"
read -r -a targets <<< "${CUDA_BUILD_TARGETS:-encoder-server encoder-bench-forward reference_test}"
arch="${CUDA_ARCH:-9.0}"
toolkit="$repo/.cuda-toolkit"
wheels="$toolkit/wheels"
cuda_root="$toolkit/root"
py="${CUDA_PYTHON:-$repo/.venv/bin/python}"

step() { printf '\n== cuda_build: %s\n' "$*"; }
now() { date +%s; }

step "1/6 Python environment (.venv with the CUDA torch wheel)"
if [ ! -x "$py" ] && [ -z "${CUDA_PYTHON:-}" ]; then
  bash scripts/python_env.sh
fi
# torch's CUDA version, the runtime wheel's version, the venv's nvidia/cuNN
# directory and the wheel's CMake prefix.
read -r torch_cuda runtime_version nvidia_dir torch_cmake < <("$py" - <<'EOF'
import importlib.metadata as md, os, torch, torch.utils, nvidia
cuda = torch.version.cuda or ""
major = cuda.split(".")[0]
nv = next(os.path.join(p, "cu" + major) for p in nvidia.__path__
          if os.path.isdir(os.path.join(p, "cu" + major)))
print(cuda or "none", md.version("nvidia-cuda-runtime"), nv,
      torch.utils.cmake_prefix_path)
EOF
)
version="${CUDA_PKG_VERSION:-$runtime_version}"
echo "torch $("$py" -c 'import torch; print(torch.__version__)') built with CUDA $torch_cuda"
echo "nvidia-cuda-runtime $runtime_version in $nvidia_dir; nvcc wheels at $version"
case "$version" in
  "$torch_cuda".*) ;;
  *) echo "cuda_build: CUDA $version does not match torch's CUDA $torch_cuda" >&2
     exit 1 ;;
esac

step "2/6 NVIDIA compiler wheels from PyPI ($wheels)"
mkdir -p "$wheels"
download_start=$(now)
downloaded=0
for pkg in nvidia-cuda-nvcc nvidia-cuda-crt nvidia-nvvm; do
  if compgen -G "$wheels/${pkg//-/_}-$version-*.whl" > /dev/null; then
    echo "$pkg==$version: already downloaded"
  else
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps \
      --only-binary=:all: -d "$wheels" "$pkg==$version"
    downloaded=1
  fi
done
download_s=$(( $(now) - download_start ))
wheel_files=()
for pkg in nvidia_cuda_nvcc nvidia_cuda_crt nvidia_nvvm; do
  wheel_files+=("$(compgen -G "$wheels/$pkg-$version-*.whl" | head -n1)")
done
for w in "${wheel_files[@]}"; do
  printf '%12s bytes  %s\n' "$(stat -c %s "$w")" "$(basename "$w")"
done
download_bytes=$(stat -c %s "${wheel_files[@]}" | awk '{s += $1} END {print s}')
if [ "$downloaded" = 1 ]; then
  echo "downloaded in ${download_s} s"
fi

step "3/6 CUDA toolkit root ($cuda_root)"
stamp="$(printf '%s\n' "${wheel_files[@]}" "$nvidia_dir" "layout 1" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$cuda_root/.stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "up to date"
else
  tmp="$cuda_root.tmp"
  rm -rf "$tmp" "$cuda_root"
  mkdir -p "$tmp"
  # The wheels' nvidia/cuNN/ trees, unpacked as real files with their modes
  # (nvcc finds cicc, ptxas and its headers relative to itself).
  "$py" - "$tmp" "${wheel_files[@]}" <<'EOF'
import os, sys, zipfile
dest, wheels = sys.argv[1], sys.argv[2:]
for wheel in wheels:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            parts = info.filename.split("/")
            if len(parts) < 3 or parts[0] != "nvidia" or info.is_dir():
                continue
            out = os.path.join(dest, *parts[2:])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(info) as src, open(out, "wb") as dst:
                dst.write(src.read())
            mode = (info.external_attr >> 16) & 0o777
            os.chmod(out, mode or 0o644)
EOF
  chmod +x "$tmp"/bin/* "$tmp"/nvvm/bin/* 2>/dev/null || true
  # The venv's headers and libraries, linked in.
  mkdir -p "$tmp/include" "$tmp/lib"
  for entry in "$nvidia_dir"/include/*; do
    name="$(basename "$entry")"
    if [ -e "$tmp/include/$name" ]; then
      echo "include/$name: kept from the nvcc wheels"
    else
      ln -s "$entry" "$tmp/include/$name"
    fi
  done
  for lib in "$nvidia_dir"/lib/*; do
    ln -s "$lib" "$tmp/lib/$(basename "$lib")"
  done
  # Unversioned names (libcudart.so -> libcudart.so.13, ...) for find_library
  # and -lfoo.
  for lib in "$tmp"/lib/lib*.so.*; do
    name="$(basename "$lib")"
    plain="${name%%.so.*}.so"
    [ -e "$tmp/lib/$plain" ] || ln -s "$name" "$tmp/lib/$plain"
  done
  ln -s lib "$tmp/lib64"
  echo "$stamp" > "$tmp/.stamp"
  mv "$tmp" "$cuda_root"
  echo "assembled: $(find "$cuda_root/lib/" -name 'lib*.so' | wc -l) unversioned libraries"
fi
"$cuda_root/bin/nvcc" --version | tail -n 2

step "4/6 configure $build (CUDA LibTorch from $torch_cmake)"
export PATH="$cuda_root/bin:$PATH"
# The wheel's config looks for Caffe2 and its libraries with PATHS, which
# come after the system's: Debian's libtorch-dev (CPU) would win. They are
# named here instead (CMAKE_PREFIX_PATH would also make FindProtobuf take
# the wheel's copy of the protobuf headers).
torch_lib="$(cd "$torch_cmake/../../lib" && pwd)"
configure_start=$(now)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DENCODER_TORCH_WHEEL= \
  -DTorch_DIR="$torch_cmake/Torch" -DCaffe2_DIR="$torch_cmake/Caffe2" \
  -DTORCH_LIBRARY="$torch_lib/libtorch.so" \
  -Dc10_LIBRARY="$torch_lib/libc10.so" \
  -DC10_CUDA_LIBRARY="$torch_lib/libc10_cuda.so" \
  -DCUDA_TOOLKIT_ROOT_DIR="$cuda_root" \
  -DCUDAToolkit_ROOT="$cuda_root" \
  -DCMAKE_CUDA_COMPILER="$cuda_root/bin/nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="${arch//./}" \
  -DTORCH_CUDA_ARCH_LIST="$arch" \
  -DENCODER_CONFORMANCE_PYTHON="$py"
configure_s=$(( $(now) - configure_start ))
echo "configure: ${configure_s} s"

step "5/6 build ${targets[*]} (-j $jobs)"
build_start=$(now)
if ! cmake --build "$build" --parallel "$jobs" --target "${targets[@]}"; then
  echo "cuda_build: build failed after $(( $(now) - build_start )) s" >&2
  exit 1
fi
build_s=$(( $(now) - build_start ))
echo "build: ${build_s} s"

step "6/6 CUDA linkage"
server="$build/encoder-server"
echo "ldd $server | grep -E 'libtorch_cuda|libc10_cuda':"
if ! ldd "$server" | grep -E 'libtorch_cuda|libc10_cuda'; then
  echo "cuda_build: $server does not link the CUDA LibTorch" >&2
  exit 1
fi
if ldd "$server" | grep -q 'not found'; then
  echo "cuda_build: unresolved libraries:" >&2
  ldd "$server" | grep 'not found' >&2
  exit 1
fi

echo
echo "cuda_build: done: wheels $download_bytes bytes$( [ "$downloaded" = 1 ] && echo " (downloaded in ${download_s} s)"), configure ${configure_s} s, build ${build_s} s (-j $jobs)"
