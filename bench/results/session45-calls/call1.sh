#!/usr/bin/env bash
# Session 45's first call: do one binary's runs draw the same tokens (session 44 found
# the 0.56B's digest differing between runs of one setting)? The 0.56B at batches 1 and 16,
# each run's tokens written out (--tokens-out) and compared (bench/token_runs.py): the
# defaults eight times, then with one default off at a time; then compute-sanitizer's
# tools over a short run. Results in $OUT/call1.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "compute-sanitizer: ${san:-none}"
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== checkpoint ($((SECONDS - t0)) s)"

runs() {  # MODE COUNT
  local mode=$1 i f
  for i in $(seq 1 "$2"); do
    (($(left) > 200)) || return 0
    f=$w/$mode-$i
    # shellcheck disable=SC2046  # the mode's switches and arguments split on purpose
    env $(envs_of "$mode") timeout 90 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
      --batch 1 16 --prompt-len 32 --new-tokens 128 --repeats 3 --roofline-rounds 0 --json \
      --tokens-out "$f.tokens.jsonl" $(args_of "$mode") >"$f.jsonl" 2>"$f.err"
    echo "$mode $i: exit $? $(python3 -c 'import json,sys
for l in open(sys.argv[1]): j=json.loads(l); print("b%d %s %.1f us;" % (j["batch"], " ".join(d[:8] for d in j["tokens_digests"]), 1e3*j["step_ms"]), end=" ")' "$f.jsonl" 2>/dev/null)"
  done
}
runs defaults 8
python3 bench/token_runs.py "$w"/defaults-*.tokens.jsonl
for mode in noside nopdl nographs sync; do runs "$mode" 3; done
echo "== every run together ($((SECONDS - t0)) s)"
python3 bench/token_runs.py "$w"/*.tokens.jsonl | cut -c1-300

# compute-sanitizer over batch 1, 4 new tokens, one timed run: uninitialised reads first
# (a masked read of fresh memory would differ by process), then bounds, shared-memory races
# and barriers.
if [[ -n $san ]]; then
  for tool in initcheck memcheck synccheck racecheck; do
    (($(left) > 30)) || break
    echo "== $tool ($((SECONDS - t0)) s)"
    timeout $(($(left) - 20 < 150 ? $(left) - 20 : 150)) "$san" --tool "$tool" --print-limit 20 \
      --error-exitcode 9 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 \
      --prompt-len 32 --new-tokens 4 --repeats 1 --roofline-rounds 0 >"$w/san-$tool.log" 2>&1
    echo "exit $?"
    grep -E "ERROR SUMMARY|Invalid|Uninitialized|hazard|Barrier|at 0x|by thread" "$w/san-$tool.log" |
      sort | uniq -c | sort -rn | head -12 | cut -c1-220
  done
fi
finish call1
