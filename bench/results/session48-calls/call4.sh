#!/usr/bin/env bash
# Session 48's last call (what budget was left): the attention tests under the new default
# (one-chunk rows written by the split kernel; call3's filter missed the parameterized
# walk and split tests), then the GEMV suite at entry 5 with its weights out of L2 under
# each chain mode (late, the default; loads; last) and with chained launches off
# (MSTAR_PDL=0): call3 found the isolated GEMV as slow as in the step (in_proj 17.2 us, 2.45
# TB/s against the H100's 3.0; ~3 us a launch beyond the bytes at every size), so is the
# chained overlap doing anything between two back-to-back GEMVs?
# Pack as call1.sh says, with call4.sh; `CALL_LIMIT=190 bash .carry/call4.sh`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
echo "== tests ($((SECONDS - t0)) s)"
gpu_tests '*gpu_attention_walk*:*gpu_attention_split_variant*:gpu_attention.*' 100
grep "^\[ RUN" "$w/tests.log" | tail -1
echo "== the GEMV suite, cold ($((SECONDS - t0)) s)"
for mode in late loads last pdl0; do
  (($(left) > 25)) || break
  if [[ $mode == pdl0 ]]; then set -- MSTAR_PDL=0; else set -- "MSTAR_GEMV_CHAIN=$mode"; fi
  env "$@" timeout 25 "$bin/mstar-gpu-bench" --suite gemv --gemv-cold --gemv-variants 5 --rounds 3 \
    --json >"$w/gemv-$mode.jsonl" 2>"$w/gemv-$mode.err"
  gemv_lines "$w/gemv-$mode.jsonl" "$mode" h2048
done
finish call4
