#!/usr/bin/env bash
# Session 45's fourth call: the fix (chained kernels read what earlier kernels wrote with
# coherent loads, common.cuh's load_coherent, not __ldg). The new repeat test with the test
# binary from before the fix (.carry/old/, expected to fail) and after it; the 0.56B at
# batches 1 and 16 after the fix, each run's tokens written out; then the whole GPU suite.
# Results in $OUT/call4.tgz.
set -uo pipefail
source "$(dirname "$0")/common.sh"
old=.carry/old
for b in "$old" "$bin"; do
  echo "== gpu_model_repeats with $b ($((SECONDS - t0)) s)"
  timeout 120 "$b/mstar_gpu_tests" --gtest_filter='gpu_model_repeats.*' >"$w/repeats-$(basename "$b").log" 2>&1
  echo "exit $?"
  grep -E "^\[ +(OK|FAILED|PASSED) +\]|request [0-9]+$|Which is|run [0-9]" "$w/repeats-$(basename "$b").log" | head -8 | cut -c1-160
done
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B after the fix ($((SECONDS - t0)) s)"
for rep in 1 2 3; do
  (($(left) > 200)) || break
  f=$w/nh056-new-$rep
  timeout 90 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 16 --prompt-len 32 \
    --new-tokens 128 --repeats 3 --roofline-rounds 1 --json --tokens-out "$f.tokens.jsonl" \
    >"$f.jsonl" 2>"$f.err"
  echo "new $rep: exit $? $(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l); r=j.get("roofline_decode",{})
    print("b%d %s %.1f us (%.3f);" % (j["batch"], " ".join(d[:8] for d in j["tokens_digests"]), 1e3*j["step_ms"], r.get("bandwidth_fraction",0)), end=" ")' "$f.jsonl" 2>/dev/null)"
done
python3 bench/token_runs.py "$w"/nh056-new-*.tokens.jsonl | grep '^batch' | cut -c1-200
echo "== the GPU suite ($((SECONDS - t0)) s)"
timeout "$(($(left) - 10))" "$bin/mstar_gpu_tests" >"$w/gpu-tests.log" 2>&1
echo "exit $?"
grep -E "^\[==========\]|^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \] [0-9]" "$w/gpu-tests.log" | head -20
grep -c "^\[       OK \]" "$w/gpu-tests.log"
tail -3 "$w/gpu-tests.log" | cut -c1-160
finish call4
