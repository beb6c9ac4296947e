#!/usr/bin/env bash
# Session 56's first device call. (1) The 0.56B at batch 1 on the defaults and with the GEMV's
# bounded L2 prefetch (MSTAR_GEMV_PREFETCH_GROUPS 2 / 4: a chained GEMV with static
# weights asks L2, before its wait, for that many load groups after its first), with the LM
# head's GEMV on entries 1 and 3 (MSTAR_GEMV_HEAD_VARIANT: half and a quarter of the blocks, the
# same bits) and with the argmax fold off, two alternated rounds (an H200's figure for the
# defaults if this is one: the last was session 51's); the step timeline of the defaults; the
# one-row GEMV alone, cold, plain and folded. (2) Session 55's unrun
# call3: the attention GPU tests on the mma walk's copies-first order (its only order since
# a261a7d) and rows_mma without the last-warp hand-off; compute-sanitizer racecheck and
# memcheck over both walks' decode tests (racecheck has not run over copies first); decode
# attention at 1 / 4 / 16 / 64 / 256 rows of 2,048 positions and one row of 160; Nsight Compute
# over the mma walk's split launch at 4 rows. Pack: `rm -rf .carry && PACK_XZ=1
# scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu && cp
# bench/device_calls.sh bench/results/session56-calls/{common.sh,call1.sh} .carry/ && rm -rf
# .carry/bin .carry/lib`, `bash bench/profile/build.sh`; run `CALL_LIMIT=480 bash
# .carry/call1.sh` carrying `.carry` and `.profile/libmstar_kernel_times.so`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults pf2 head3 argmax0 pf4 head1" 1
best=$(fastest_modes 1 "pf2 pf4 head1 head3")
echo "fastest candidate: $best"
timeline_of defaults
# The one-row GEMV alone, each projection plain and in its fold, at the default entry, each
# call's weights out of L2 (the H200's LM head took 42.8 us in session 47's step against
# 31.7-32.5 plain and hot).
timeout 60 "$bin/mstar-gpu-bench" --suite gemv --gemv-cold --gemv-variants -1 --json \
  >"$w/gemv-cold.jsonl" 2>"$w/gemv-cold.err"
echo "gemv exit $? ($((SECONDS - t0)) s)"
gemv_lines "$w/gemv-cold.jsonl" cold
gpu_tests '*gpu_attention*' 100
sanitize_tests 'every_walk/gpu_attention_walk.decode_matches_the_cpu/mma:every_walk/gpu_attention_walk.decode_matches_the_cpu/rows_mma' 120
export ATTN_SHAPES="--rows 1 4 16 64 256 --prefill-rows 1 --rounds 5"
(($(left) > 90)) && attn_setting defaults MSTAR_NONE=0
(($(left) > 60)) && ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting ctx160 MSTAR_NONE=0
python3 - "$w/attn.jsonl" <<'PY' | tee "$w/attn-table.txt"
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "decode" in d.get("case", ""):
        print(f"{d['setting']:10} {d['case']:32} {d['us_per_call']:8.2f} us")
PY
ncu_attention ncu-mma4 attend_decode_mma 4 2 "--rows 4 --prefill-rows 1" MSTAR_NONE=0
finish call1
