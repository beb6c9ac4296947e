#!/usr/bin/env bash
# scripts/fuzz.sh [HTTP_SECONDS [EACH_SECONDS]]: builds the libFuzzer targets
# with clang in build-fuzz/ and runs each over a copy of its committed seed
# corpus (tests/fuzz/corpus/<name>): the HTTP request fuzzer for HTTP_SECONDS
# (default 60), the others (safetensors header, config.json, tokenizer.json,
# mstar-tool keys / sim lines, windows arguments, PNG / JPEG bytes) for
# EACH_SECONDS each (default 60). Before fuzzing, each target runs once over
# tests/fuzz/regressions/<name>/: inputs that crashed it once (the hostile
# inputs of issue 19 among them), which must stay fixed. Fails on a crash, a
# broken property, a sanitizer report, a leak, a timeout or running out of
# memory; prints each fuzzer's execution count and a base64 reproducer of
# every failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
http_seconds=${1:-60}
each_seconds=${2:-60}
# name max_len
fuzzers=(
  "http 65536"
  "safetensors_header 16384"
  "config_json 16384"
  "tokenizer_json 65536"
  "tool_keys 16384"
  "tool_sim 16384"
  "tool_windows 512"
  "image_decode 65536"
)
targets=()
for f in "${fuzzers[@]}"; do
  name=${f%% *}
  targets+=("mstar-fuzz-${name//_/-}")
done
# MSTAR_FUZZ_OPT=-O0 builds faster and fuzzes slower (CI's short runs).
# lld where it is installed (scripts/install-deps.sh installs it): faster links.
linker=
command -v ld.lld >/dev/null && linker=lld
scripts/build.sh build-fuzz -DMSTAR_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  -DMSTAR_FUZZ_OPT="${MSTAR_FUZZ_OPT:--O1}" -DMSTAR_LINKER="$linker" -- "${targets[@]}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
for f in "${fuzzers[@]}"; do
  name=${f%% *}
  max_len=${f##* }
  seconds=$each_seconds
  [[ $name == http ]] && seconds=$http_seconds
  dir=$work/$name
  mkdir -p "$dir/corpus" "$dir/artifacts"
  for known in tests/fuzz/regressions/"$name"/*; do
    [[ -e $known ]] || continue
    rc=0
    build-fuzz/tests/fuzz/"mstar-fuzz-${name//_/-}" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 "$known" >"$dir/regression.log" 2>&1 || rc=$?
    if ((rc != 0)); then
      grep -v -E "^#[0-9]+|NEW_FUNC|Uses: " "$dir/regression.log" | tail -30 >&2
      echo "fuzz: $name fails on the known input $known (exit $rc)" >&2
      failed+=("$name on $known")
    fi
  done
  cp tests/fuzz/corpus/"$name"/* "$dir/corpus/"
  rc=0
  build-fuzz/tests/fuzz/"mstar-fuzz-${name//_/-}" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
    -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log" 2>&1 || rc=$?
  echo "== $name ($seconds s): $(grep -E "stat::number_of_executed_units" "$dir/log" | tr -s ' ' || true)" \
    "$(grep -E "stat::peak_rss_mb" "$dir/log" | tr -s ' ' || true)"
  if ((rc != 0)); then
    grep -v -E "^#[0-9]+|NEW_FUNC|Uses: " "$dir/log" | tail -60 >&2
    for a in "$dir"/artifacts/*; do
      [[ -e $a ]] && { echo "fuzz: $name reproducer (base64): $(base64 -w0 "$a" | head -c 4096)" >&2; }
    done
    failed+=("$name (exit $rc)")
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
