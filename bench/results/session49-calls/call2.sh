#!/usr/bin/env bash
# Session 49's second call. call1 (H200): the staged GEMV (MSTAR_GEMV_STAGE=1, warp 0's
# bulk copies) lost 37 us a step (459.3 against 422.0), the same tokens; its out_proj
# still ended 6 us after the SSD update, as the streamed one does. Is it the SMs' L1 /
# shared split (an SM changes it only when empty, so 64 KiB blocks may not start beside
# the SSD update's and in_proj's last blocks)? Every chained kernel preferring the most
# shared memory (MSTAR_SMEM_CARVEOUT=100), alone and with either staging (2: every
# thread's async copies), two rounds alternated; the staged tests (both copy forms); the
# fastest staged mode's timeline; the isolated plain out_proj staged and streamed.
# Pack as call1.sh says, with call2.sh; `CALL_LIMIT=300 bash .carry/call2.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== staged GEMV tests ($((SECONDS - t0)) s)"
gpu_tests 'gpu_linear.staged*' 40
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== the 0.56B at batch 1 ($((SECONDS - t0)) s)"
modes="defaults carve100 stage1carve100 stage2carve100 stage2 merge2 chunk64merge2 chunk32merge2"
nh056_rounds 2 "$modes" 1
echo "== fastest: $(fastest_modes 3 "$modes" | tr '\n' ' ')"
best=$(fastest_modes 6 "$modes" | grep stage | head -1)
echo "== timeline of $best ($((SECONDS - t0)) s)"
if [[ -n $best ]] && (($(left) > 60)); then
  timeline_of "$best"
  grep -E "gemv|ssd_update" "$w/nh056-decode1-$best.launches.txt" | sed -n 1,8p
fi
echo "== the isolated out_proj ($((SECONDS - t0)) s)"
for mode in 0 1 2; do
  (($(left) > 30)) || break
  MSTAR_GEMV_STAGE=$mode timeout 25 "$bin/mstar-gpu-bench" --suite gemv --gemv-cold \
    --gemv-variants -1 --rounds 3 --json >"$w/gemv-stage$mode.jsonl" 2>"$w/gemv-stage$mode.err"
  gemv_lines "$w/gemv-stage$mode.jsonl" "stage$mode" plain_h2048_out_proj
done
finish call2
