#!/usr/bin/env bash
# bench/expect_output.sh REGEX COMMAND [ARGS...]: runs a benchmark for CTest,
# passing its output through. Fails when the command exits non-zero (its
# work failed) or prints no line matching REGEX (grep -E; it did not report).
# CTest's PASS_REGULAR_EXPRESSION alone would ignore the exit code.
set -uo pipefail
regex=$1
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if ((rc != 0)); then
  echo "expect_output: $1 exited with status $rc" >&2
  exit 1
fi
if ! grep -q -E -- "$regex" "$out"; then
  echo "expect_output: $1 printed no line matching $regex" >&2
  exit 1
fi
