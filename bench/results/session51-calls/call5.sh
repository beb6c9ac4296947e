#!/usr/bin/env bash
# Session 51's fifth call, on the session's final kernels (call2's: the held RMS prologue and
# the conv prefetch removed after call4). Three rounds of the 0.56B at batch 1, defaults
# against the SSD update's release at its start and the one-wave pick off; Qwen3.5 0.5B at the
# defaults; then mstar_gpu_tests from its start in the time left, but for the tests call2 ran
# on the same kernels. Pack as session 50's README says, with call5.sh;
# `CALL_LIMIT=500 bash .carry/call5.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 3 "defaults ssdstart wpicknone" 1
if (($(left) > 200)); then
  checkpoint qwen qwen3_5-0.5b
  for rep in 1 2; do
    f=$w/qwen-defaults-$rep.jsonl
    timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/qwen" --batch 1 --new-tokens 128 \
      --repeats 3 --prompt-len 32 --json >"$f" 2>"$f.err"
    model_summary defaults "$f"
  done
fi
echo "== mstar_gpu_tests but call2's ($((SECONDS - t0)) s)"
gpu_tests '*-gpu_linear.every_gemv*:gpu_linear.the_one_wave_pick*:gpu_recurrent.ssd_update*:gpu_recurrent.ssd_scan_and_update*:gpu_model*' $(($(left) - 12))
grep -c "^\[ RUN" "$w/tests.log"
finish call5
