#!/usr/bin/env bash
# The README's test command and what CI runs: installs what is missing,
# builds and runs every test twice, in the default configuration (CUDA
# sources built when nvcc is found; GPU tests skip without a GPU) and with
# AddressSanitizer + UndefinedBehaviorSanitizer (CPU only). Any failure stops
# the run with a non-zero exit and the failing test's output.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
started=$SECONDS

fail() {
  echo >&2
  echo "run-tests: FAILED: $*" >&2
  exit 1
}

scripts/install-deps.sh || fail "installing packages"

echo "== default configuration (build/)"
scripts/build.sh build -DMSTAR_CUDA=AUTO || fail "building build/"
ctest --test-dir build --output-on-failure --no-tests=error -j "$(nproc)" ||
  fail "tests in build/"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
scripts/build.sh build-asan -DMSTAR_SANITIZE=ON -DMSTAR_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug ||
  fail "building build-asan/"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure --no-tests=error -j "$(nproc)" ||
  fail "tests in build-asan/ (sanitizers)"

echo "run-tests: all passed in $((SECONDS - started)) s"
