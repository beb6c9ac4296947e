#!/usr/bin/env bash
# scripts/build.sh BUILD_DIR [CMAKE_ARGS...] [-- TARGETS...]
# Configures BUILD_DIR (first time, or with new arguments) and builds it
# incrementally with Ninja. Used by run-main.sh, run-tests.sh and bench/run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$1
shift
cmake_args=()
targets=()
while (($#)); do
  if [[ $1 == -- ]]; then
    shift
    targets=("$@")
    break
  fi
  cmake_args+=("$1")
  shift
done
jobs=${MSTAR_JOBS:-$(nproc)}
if [[ ! -f $build_dir/CMakeCache.txt ]] || ((${#cmake_args[@]})); then
  cmake -S "$root" -B "$build_dir" -G Ninja "${cmake_args[@]}" >"$build_dir.configure.log" 2>&1 || {
    cat "$build_dir.configure.log" >&2
    echo "build: configuring $build_dir failed (log above)" >&2
    exit 1
  }
fi
target_args=()
for t in "${targets[@]}"; do target_args+=(--target "$t"); done
cmake --build "$build_dir" -j "$jobs" "${target_args[@]}"
