#!/usr/bin/env bash
# Fails when a C++ source (*.cc, *.h) is not formatted as the committed
# .clang-format says, and lists the files to run `clang-format -i` on.
# Checks the files git tracks; without git (or outside a work tree) it checks
# every *.cc and *.h under server/, client/ and tests/.
# Usage: format_check.sh SOURCE_DIR [CLANG_FORMAT]
set -u
root="${1:?usage: format_check.sh SOURCE_DIR [CLANG_FORMAT]}"
clang_format="${2:-clang-format}"
cd "$root" || exit 1

if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "format_check: $clang_format not found (scripts/install_deps.sh" \
    "installs it)"
  exit 1
fi
if [ ! -f .clang-format ]; then
  echo "format_check: no .clang-format in $root"
  exit 1
fi

files=()
if command -v git >/dev/null 2>&1 &&
  git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  while IFS= read -r -d '' f; do
    # Tracked but deleted in the work tree: nothing to check.
    [ -f "$f" ] && files+=("$f")
  done < <(git ls-files -z -- '*.cc' '*.h')
fi
if [ "${#files[@]}" -eq 0 ]; then
  while IFS= read -r -d '' f; do
    files+=("$f")
  done < <(find server client tests -type f \( -name '*.cc' -o -name '*.h' \) \
    -print0 2>/dev/null | sort -z)
fi
if [ "${#files[@]}" -eq 0 ]; then
  echo "format_check: no C++ sources found under $root"
  exit 1
fi

output=$("$clang_format" --dry-run --Werror "${files[@]}" 2>&1)
status=$?
if [ "$status" -eq 0 ]; then
  echo "format_check: ${#files[@]} files clean ($("$clang_format" --version))"
  exit 0
fi
unformatted=$(printf '%s\n' "$output" |
  sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: .*clang-format-violations.*$/\1/p' |
  sort -u)
if [ -z "$unformatted" ]; then
  # clang-format itself failed (bad style file, unreadable source, ...).
  echo "format_check: $clang_format failed with status $status" \
    "(first lines of its output):"
  printf '%s\n' "$output" | head -n 20
  exit 1
fi
count=$(printf '%s\n' "$unformatted" | wc -l)
echo "format_check: $count of ${#files[@]} files are not clang-format clean;"
echo "fix them with: clang-format -i FILE..."
printf '%s\n' "$unformatted" | sed 's/^/  /'
exit 1
