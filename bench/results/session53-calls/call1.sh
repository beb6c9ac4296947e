#!/usr/bin/env bash
# Session 53's first device call (built without a GPU in session 53, for the next session that
# gets one): the rows_mma walk's last-warp hand-off (MSTAR_ATTN_ROWS_MMA_LAST_WARP=1: each warp
# counts itself out of a ring stage in shared memory and the last one refills it, in place of a
# block barrier after every stage). First its GPU test (the block barrier's bits, one pass and
# split under both merges) with the rows_mma and fused-merge tests, racecheck and memcheck over
# it, then decode attention at 16 / 64 / 256 rows of 2,048 positions on the defaults and with
# the hand-off, alternated twice, then the 0.56B at batch 1 on the defaults (two rounds: the
# H200 figure the last sessions lacked, if this is an H200) with its step timeline, and Qwen3.5
# 0.5B's step timeline. Pack: `rm -rf .carry && PACK_XZ=1 scripts/pack-device.sh
# mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu && cp bench/device_calls.sh
# bench/results/session53-calls/{common.sh,call1.sh} .carry/ && rm -rf .carry/bin .carry/lib`,
# `bash bench/profile/build.sh`; run `CALL_LIMIT=560 bash .carry/call1.sh` carrying `.carry`
# and `.profile/libmstar_kernel_times.so` (no .whl-baselines: with the tests it passes 64 MiB).
set -uo pipefail
source "$(dirname "$0")/common.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
gpu_tests 'gpu_attention_rows_mma.*:gpu_attention_fused_merge.*:gpu_attention.*rows_mma*' 150
# compute-sanitizer over the new test (the hand-off is all shared-memory counting): racecheck
# and memcheck, each bounded; exit 9 is a report.
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for tool in racecheck memcheck; do
  (($(left) > 200)) || break
  timeout 100 "$cs" --tool $tool --error-exitcode 9 "$bin/mstar_gpu_tests" \
    --gtest_filter='gpu_attention_rows_mma.*' >"$w/$tool.log" 2>&1
  echo "$tool exit $? ($((SECONDS - t0)) s)"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|^\[  PASSED|^\[  FAILED" "$w/$tool.log" | head -4
done
export ATTN_SHAPES="--rows 16 64 256 --prefill-rows 1 --rounds 5"
for rep in 1 2; do
  (($(left) > 90)) || break
  attn_setting "defaults$rep" MSTAR_NONE=0
  attn_setting "lastwarp$rep" MSTAR_ATTN_ROWS_MMA_LAST_WARP=1
done
python3 - "$w/attn.jsonl" <<'PY' | tee "$w/attn-table.txt"
import collections, json, sys
t = collections.defaultdict(dict)
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "decode" in d.get("case", ""):
        t[d["case"]][d["setting"]] = d["us_per_call"]
for case, s in t.items():
    print(f"{case:60} " + "  ".join(f"{k} {v:8.2f}" for k, v in sorted(s.items())))
PY
checkpoint nh056 nemotron_h-0.56b
nh056_rounds 2 "defaults" 1
(($(left) > 60)) && timeline_of defaults
# Qwen3.5's step timeline, which session 52's 600-kernel window missed (now 4,000 kernels).
if (($(left) > 80)); then
  checkpoint qwen qwen3_5-0.5b
  timeline_of defaults qwen
fi
finish call1
