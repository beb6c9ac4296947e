#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS]: builds the libFuzzer targets with clang in
# build-fuzz/ and runs the HTTP request fuzzer for SECONDS (default 60) over
# a copy of the committed seed corpus (tests/fuzz/corpus). Fails on a crash,
# a sanitizer report or a leak; prints libFuzzer's execution count.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-60}
scripts/build.sh build-fuzz -DMSTAR_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -- mstar-fuzz-http
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/* "$work/"
rc=0
build-fuzz/tests/fuzz/mstar-fuzz-http -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 -artifact_prefix="$work/" "$work" >"$work/log" 2>&1 || rc=$?
grep -E "DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$work/log" || true
if ((rc != 0)); then
  grep -v -E "^#[0-9]+|NEW_FUNC|Uses: " "$work/log" | tail -60 >&2
  for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [[ -e $a ]] && { echo "fuzz: reproducer (base64): $(base64 -w0 "$a")" >&2; }
  done
  echo "fuzz: the HTTP fuzzer failed (exit $rc; see above)" >&2
  exit 1
fi
