#!/usr/bin/env bash
# Session 49's third call: call2's stage2 runs were of a stale gemv.cu object (the async-copy
# form's edit landed while nvcc read the file; the env switch then meant nothing), so
# again: the staged tests (both copy forms), the isolated plain out_proj streamed and
# staged both ways, the 0.56B with MSTAR_GEMV_STAGE=2 and with the new chain mode `wave`
# (one-wave GEMVs release the next kernel at their start) against the defaults, the
# fastest's timeline, the model tests under `wave`.
# Pack as call1.sh says, with call3.sh; `CALL_LIMIT=240 bash .carry/call3.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== staged GEMV tests ($((SECONDS - t0)) s)"
gpu_tests 'gpu_linear.staged*' 40
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the isolated out_proj ($((SECONDS - t0)) s)"
for mode in 0 1 2; do
  MSTAR_GEMV_STAGE=$mode timeout 25 "$bin/mstar-gpu-bench" --suite gemv --gemv-cold \
    --gemv-variants -1 --rounds 3 --json >"$w/gemv-stage$mode.jsonl" 2>"$w/gemv-stage$mode.err"
  gemv_lines "$w/gemv-stage$mode.jsonl" "stage$mode" plain_h2048_out_proj
done
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
modes="defaults stage2 chainwave stage2wave chunk32merge2"
nh056_rounds 2 "$modes" 1
best=$(fastest_modes 1 "$modes")
echo "== timeline of $best ($((SECONDS - t0)) s)"
if (($(left) > 50)); then
  timeline_of "$best"
  grep -E "gemv|ssd_update|attend|merge" "$w/nh056-decode1-$best.launches.txt" | sed -n 1,14p
fi
echo "== model tests under wave ($((SECONDS - t0)) s)"
(($(left) > 40)) && MSTAR_GEMV_CHAIN=wave gpu_tests 'gpu_model*' $(($(left) - 15))
finish call3
