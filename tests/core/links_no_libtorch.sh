#!/usr/bin/env bash
# The core and the model handle (server/api) link no LibTorch: a program
# built from encoder_core alone (a tests/core test over fake models) must
# load none of LibTorch's libraries. Usage: links_no_libtorch.sh PROGRAM...
set -u
status=0
for program in "$@"; do
  if ! deps=$(ldd "$program" 2>&1); then
    echo "ldd $program failed: $deps"
    status=1
    continue
  fi
  torch=$(echo "$deps" | grep -E "lib(torch|c10)[a-z_]*\.so")
  if [ -n "$torch" ]; then
    echo "$program loads LibTorch (the core or server/api reached it):"
    echo "$torch"
    status=1
  else
    echo "$(basename "$program"): $(echo "$deps" | wc -l) libraries, no LibTorch"
  fi
done
exit "$status"
