#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and run.
# Used by the README's two commands, by CI and by deploy/Dockerfile.
# Usage: install_deps.sh [runtime|build|test|helm]   (default: test, the
# superset; helm: only the Helm build below, which scripts/test.sh runs in
# the background). ENCODER_DEPS_NO_HELM=1 leaves Helm out of `test`.
set -euo pipefail
mode="${1:-test}"

runtime_pkgs=(libgrpc++1.51 libprotobuf32
  libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libspdlog1.10
  libicu72 libpcre2-8-0 libssl3 zlib1g libsentencepiece0 libcurl4
  ca-certificates)
build_pkgs=(build-essential cmake ninja-build pkg-config git
  python3-pip libgrpc++-dev libgrpc-dev
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libabsl-dev
  prometheus-cpp-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libicu-dev libpcre2-dev libboost1.74-dev libssl-dev zlib1g-dev
  libsentencepiece-dev libcurl4-openssl-dev)
test_pkgs=(libgtest-dev libgmock-dev python3-numpy python3-grpcio python3-h2
  python3-protobuf clang-format prometheus nginx docker-compose python3-yaml
  python3-matplotlib python3-setuptools python3-venv
  chromium nodejs openssl clang-14 libclang-rt-14-dev python3-sentencepiece
  curl lld)
# LibTorch is not a Debian package here: scripts/libtorch.sh fetches the
# pinned wheel's libraries with python3-pip (build) and the binaries load
# them from where it unpacked them (deploy/Dockerfile copies them along).
# No Debian PyTorch: every test script that computes with torch (the
# float64 references of tests/reference, tests/hf and head_stats_test,
# spm_serving, the benchmarks' plumbing, the conformance suite) runs on the
# project's Python environment, .venv (scripts/python_env.sh), whose torch
# is the same pinned 2.15 wheel the builds link.
# lld links the test builds' programs several times faster than GNU ld
# (CMakeLists.txt, ENCODER_LINKER).
# libboost1.74-dev: the HTTP port is Boost.Beast on Boost.Asio, header-only
# (nothing of Boost at run time); OpenSSL for its TLS, zlib for gzip.
# python3-pip (build list), -setuptools and -venv install the encoder_client
# package offline into a test virtual environment; python3-matplotlib runs its example plot.
# curl drives the HTTP front's tests (tests/http), next to the official
# OpenAI Node client (tests/http/package.json, installed by npm ci).
# libcurl4-openssl-dev: the Hugging Face Hub client (server/hub: the
# server's --model-id, encoder-hub) does its HTTPS through libcurl (libcurl4
# at run time, with ca-certificates), and checks the downloaded files'
# sha256 with OpenSSL (libssl-dev, above).
# libsentencepiece (-dev to build, 0 at run time) encodes for model
# directories that ship only a SentencePiece .model (T5's spiece.model,
# XLM-R's sentencepiece.bpe.model), through the libencoder_spm.so module.
# python3-sentencepiece trains the SentencePiece models whose character maps
# the tokenizer reference tests read (tests/tokenizer/make_spm_fixtures.py)
# and the .model directories of tests/tokenizer/make_spm_reference.py.
# The tokenizer reference tests run the Hugging Face tokenizers library under
# Node (tests/tokenizer/package.json); Debian ships npm apart from nodejs,
# other Node builds bundle it.
if [ "$mode" = test ] && ! command -v npm >/dev/null 2>&1; then
  test_pkgs+=(npm)
fi
# The Kubernetes test renders deploy/k8s with kubectl's kustomize (Debian:
# kubernetes-client); a kubectl or kustomize installed otherwise serves too.
if [ "$mode" = test ] && ! command -v kubectl >/dev/null 2>&1 &&
  ! command -v kustomize >/dev/null 2>&1; then
  test_pkgs+=(kubernetes-client)
fi

case "$mode" in
  helm) pkgs=() ;;
  runtime) pkgs=("${runtime_pkgs[@]}") ;;
  build) pkgs=("${build_pkgs[@]}") ;;
  test) pkgs=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  *) echo "usage: $0 [runtime|build|test|helm]" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if [ "$mode" = helm ]; then
  :
elif [ "${#missing[@]}" -eq 0 ]; then
  echo "install_deps: all ${#pkgs[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Helm renders and lints the chart deploy/helm/encoder-server (the
# deploy_helm test). Not a Debian package: built from its Go module with
# the Go toolchain (1.26 or newer: the module's go directive), version
# stamped as its release builds do, into /usr/local/bin. The module and
# build caches are temporary (about 1.7 GB, removed after); about 4 minutes
# on 2 cores from nothing. Skipped when `helm version` already says
# $helm_version.
helm_version=v4.3.2
install_helm() {
  local have go tmp
  have="$(helm version --template '{{.Version}}' 2>/dev/null || true)"
  if [ "$have" = "$helm_version" ]; then
    echo "install_deps: helm $helm_version present"
    return
  fi
  go="$(command -v go || echo /usr/local/go/bin/go)"
  if [ ! -x "$go" ]; then
    echo "install_deps: helm $helm_version needs Go 1.26 or newer" \
      "(go not found)" >&2
    exit 1
  fi
  echo "install_deps: building helm $helm_version with $("$go" version)"
  tmp="$(mktemp -d)"
  # GOTOOLCHAIN=local: an older Go fails here rather than fetching one.
  if ! env GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=0 \
      GOMODCACHE="$tmp/mod" GOCACHE="$tmp/cache" GOBIN=/usr/local/bin \
      "$go" install -trimpath \
      -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$helm_version" \
      "helm.sh/helm/v4/cmd/helm@$helm_version"; then
    chmod -R u+w "$tmp"
    rm -rf "$tmp"
    echo "install_deps: building helm $helm_version failed" >&2
    exit 1
  fi
  chmod -R u+w "$tmp"
  rm -rf "$tmp"
  helm version
}
if [ "$mode" = helm ] ||
  { [ "$mode" = test ] && [ "${ENCODER_DEPS_NO_HELM:-0}" != 1 ]; }; then
  install_helm
fi
