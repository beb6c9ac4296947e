#!/usr/bin/env bash
# Session 55's third device call, after call1 / call2 (session 53's scripts, run this session:
# README.md here): the mma walk with its copies first as its only order and rows_mma without
# the last-warp hand-off. The attention GPU tests (every walk against the CPU, the fused merge's
# bits); compute-sanitizer racecheck and memcheck over the mma and rows_mma walks' decode tests
# (each bounded; exit 9 is a report); decode attention at 1 / 4 / 16 / 64 / 256 rows of 2,048
# positions and one row of 160; the 0.56B at batch 1, two runs (an H200's figure if this is
# one); Nsight Compute over the mma walk's split launch at 4 rows. Pack: `rm -rf .carry &&
# PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu &&
# cp bench/device_calls.sh bench/results/session55-calls/{common.sh,call3.sh} .carry/ &&
# rm -rf .carry/bin .carry/lib`; run `CALL_LIMIT=260 bash .carry/call3.sh` carrying `.carry`.
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests '*gpu_attention*' 120
sanitize_tests 'every_walk/gpu_attention_walk.decode_matches_the_cpu/mma:every_walk/gpu_attention_walk.decode_matches_the_cpu/rows_mma' 90
export ATTN_SHAPES="--rows 1 4 16 64 256 --prefill-rows 1 --rounds 5"
attn_setting defaults MSTAR_NONE=0
ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting ctx160 MSTAR_NONE=0
python3 - "$w/attn.jsonl" <<'PY' | tee "$w/attn-table.txt"
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "decode" in d.get("case", ""):
        print(f"{d['setting']:10} {d['case']:32} {d['us_per_call']:8.2f} us")
PY
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults" 1
# Nsight Compute over the mma walk's split launch at 4 rows (FlashInfer's lead is largest
# there: 17.1 us against 20.0 in call2), copies first now, against session 52's call4 (1.22
# TB/s, L1TEX scoreboard the top stall): launches 5-6 are the split case's.
ncu_attention ncu-mma4 attend_decode_mma 4 2 "--rows 4 --prefill-rows 1" MSTAR_NONE=0
finish call3
