#!/usr/bin/env bash
# Holds the CUDA kernels to one rule (kernels/cuda/README.md, "Chained launches"): after
# its wait a chained kernel reads what earlier kernels wrote with coherent loads
# (`load_coherent`), and the read-only path is taken only for weights and parameters,
# through `load_weight` (kernels/cuda/internal/common.cuh), never by a bare `__ldg`, an
# `ld.global.nc` in inline assembly, or `__restrict__` (which lets the compiler take that
# path by itself). Session 45's run-to-run token differences came from a bare `__ldg` of
# an input. Prints each offending line and exits 1 when any is found; run by
# scripts/run-tests.sh next to the formatting check.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
found=$(git ls-files '*.cu' '*.cuh' '*.hpp' '*.cpp' |
  grep -v '^kernels/cuda/internal/common\.cuh$' |
  xargs grep -nE '__ldg[[:space:]]*\(|ld\.global\.nc|__restrict__' 2>/dev/null || true)
if [[ -n $found ]]; then
  echo "$found"
  echo "check-kernel-loads: the lines above read through the read-only path directly; use" \
    "load_weight (weights, parameters) or load_coherent (anything a kernel wrote)," \
    "kernels/cuda/internal/common.cuh" >&2
  exit 1
fi
echo "check-kernel-loads: every read-only load goes through load_weight"
