#!/usr/bin/env bash
# Session 53's first device call (built without a GPU in session 53, for the next session that
# gets one): two switches of the decode attention kernels that keep their bits, both off by
# default until this call measures them. MSTAR_ATTN_ROWS_MMA_LAST_WARP=1: the rows_mma walk (16+
# rows) hands its ring stages back by counts in shared memory, the last warp out of a stage
# refilling it, in place of a block barrier after every stage. MSTAR_ATTN_MMA_COPIES_FIRST=1:
# the mma walk (below 16 rows; the 0.56B's batch-1 attention) reads an item's page ids and
# issues its first copies before it loads q. First their GPU tests (the same bits, one pass and
# split under both merges) with the fused-merge tests; then decode attention at 1 / 4 / 16 / 64
# / 256 rows of 2,048 positions on the defaults and with each switch, alternated twice; the one
# row of 160 positions (the 0.56B's attention in these runs) both ways; the 0.56B at batch 1 on
# the defaults and with copies first, two rounds (the H200 figure the last sessions lacked, if
# this is an H200); racecheck and memcheck over the two tests; the 0.56B's and Qwen3.5 0.5B's
# step timelines; Nsight Compute over the 160-position launch. Pack: `rm -rf .carry && PACK_XZ=1
# scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu && cp
# bench/device_calls.sh bench/results/session53-calls/{common.sh,call1.sh} .carry/ && rm -rf
# .carry/bin .carry/lib`, `bash bench/profile/build.sh`; run `CALL_LIMIT=560 bash
# .carry/call1.sh` carrying `.carry` and `.profile/libmstar_kernel_times.so` (no .whl-baselines:
# with the tests it passes 64 MiB).
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests '*gpu_attention_rows_mma.*:*gpu_attention_mma.*:*fused_merge*:gpu_attention.*' 150
# Every walk's decode against the CPU with both switches on (the tests above compare bits
# with the switches off).
MSTAR_ATTN_ROWS_MMA_LAST_WARP=1 MSTAR_ATTN_MMA_COPIES_FIRST=1 \
  gpu_tests '*gpu_attention_walk.*/mma:*gpu_attention_walk.*/rows_mma' 120
export ATTN_SHAPES="--rows 1 4 16 64 256 --prefill-rows 1 --rounds 5"
for rep in 1 2; do
  (($(left) > 150)) || break
  attn_setting "defaults$rep" MSTAR_NONE=0
  attn_setting "lastwarp$rep" MSTAR_ATTN_ROWS_MMA_LAST_WARP=1
  attn_setting "copies$rep" MSTAR_ATTN_MMA_COPIES_FIRST=1
done
python3 - "$w/attn.jsonl" <<'PY' | tee "$w/attn-table.txt"
import collections, json, sys
t = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "decode" in d.get("case", ""):
        t[d["case"]][d["setting"]] = d["us_per_call"]
for case, s in t.items():
    print(f"{case:32} " + "  ".join(f"{k} {v:8.2f}" for k, v in sorted(s.items())))
PY
# One row of 160 positions: the 0.56B's attention layers in call1's model runs (32-token
# prompts, 128 new tokens), where the timelines show ~10.7 us exposed a layer on an H100.
for rep in 1 2; do
  (($(left) > 150)) || break
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-defaults$rep" MSTAR_NONE=0
  ATTN_SHAPES="--rows 1 --context 160 --prefill-rows 1 --rounds 9" attn_setting "ctx160-copies$rep" MSTAR_ATTN_MMA_COPIES_FIRST=1
done
grep ctx160 "$w/attn.jsonl" | python3 -c "
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    print(f\"{d['setting']:22} {d['case']:28} {d['us_per_call']:7.2f} us\")"
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults copies1" 1
# compute-sanitizer over the two tests (the hand-off is all shared-memory counting), each
# bounded; exit 9 is a report.
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in racecheck memcheck; do
  (($(left) > 120)) || break
  timeout 100 "$cs" --tool $tool --error-exitcode 9 "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_attention_rows_mma.*:gpu_attention_mma.*' >"$w/$tool.log" 2>&1
  echo "$tool exit $? ($((SECONDS - t0)) s)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED" "$w/$tool.log" | head -4
done
(($(left) > 60)) && timeline_of defaults
# Qwen3.5's step timeline, which session 52's 600-kernel window missed (now 4,000 kernels).
if (($(left) > 80)); then
  checkpoint qwen qwen3_5-0.5b
  timeline_of defaults qwen
fi
# Nsight Compute over that one-row, 160-position launch alone (its duration without the
# chain's overlap, and where its warps stall), if time is left: launches 3-6, the one-pass
# case's last two and the split case's first two (the bench runs each case ~4 times under ncu).
(($(left) > 60)) && ncu_attention ncu-ctx160 attend_decode_mma 2 4 \
  "--rows 1 --context 160 --prefill-rows 1" MSTAR_NONE=0
finish call1
