#!/usr/bin/env bash
# Checks every tracked C++ and CUDA file (.cpp .hpp .cu .cuh) against the root
# .clang-format with clang-format 14 (Debian 12's; other versions format some
# constructs differently, so the version is pinned). Prints the files that
# differ and the command that formats them, and exits 1 when any differ.
# scripts/run-tests.sh runs it before building; scripts/install-deps.sh
# installs clang-format. CLANG_FORMAT=/path/to/clang-format overrides the
# binary (still version 14).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

clang_format=${CLANG_FORMAT:-}
if [[ -z $clang_format ]]; then
  for candidate in clang-format-14 clang-format; do
    if command -v "$candidate" >/dev/null; then
      clang_format=$candidate
      break
    fi
  done
fi
if [[ -z $clang_format ]]; then
  echo "check-format: clang-format not found (scripts/install-deps.sh installs it)" >&2
  exit 2
fi
version=$("$clang_format" --version)
if [[ ! $version =~ version\ 14\. ]]; then
  echo "check-format: need clang-format 14, '$clang_format' is: $version" >&2
  exit 2
fi

files=()
while IFS= read -r -d '' f; do
  [[ -f $f ]] && files+=("$f") # skip tracked files deleted in the work tree
done < <(git ls-files -z -- '*.cpp' '*.hpp' '*.cu' '*.cuh')
if ((${#files[@]} == 0)); then
  echo "check-format: no tracked C++ files found under $root" >&2
  exit 2
fi

# One clang-format process for all files; it reports each violation as
# "FILE:LINE:COL: error: code should be clang-formatted".
if output=$("$clang_format" --style=file --dry-run --Werror "${files[@]}" 2>&1); then
  echo "check-format: all ${#files[@]} tracked C++ files match .clang-format"
  exit 0
fi
mapfile -t differ < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
  <<<"$output" | sort -u)
if ((${#differ[@]} == 0)); then
  echo "$output" >&2
  echo "check-format: $clang_format failed (output above)" >&2
  exit 2
fi
{
  echo "check-format: ${#differ[@]} of ${#files[@]} files differ from .clang-format:"
  printf '  %s\n' "${differ[@]}"
  echo "format them with:"
  printf '  %s -i --style=file' "$clang_format"
  printf ' %q' "${differ[@]}"
  echo
} >&2
exit 1
