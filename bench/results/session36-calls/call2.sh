#!/usr/bin/env bash
# Session 36's second call: the GPU tests call 1's bound cut off (every walk and merge, the last
# prefill cases); racecheck over the whole-row walks; the 0.56B's batch-1 step as it runs
# (CUPTI timeline, chained launches on and off); the split-KV rule's fewest positions a chunk
# (MSTAR_ATTN_SPLIT_MIN_CHUNK) at 1 / 4 / 16 rows and in the 0.56B at batch 1.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry .profile.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 130 "$bin/mstar_gpu_tests" --gtest_filter='every_walk*:kernels/gpu_attention_prefill.*' \
  >"$out/gpu-tests-rest.log" 2>&1
echo "== walk / split / prefill tests: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/gpu-tests-rest.log"
grep -c "^\[       OK" "$out/gpu-tests-rest.log"
echo "== racecheck, whole-row walks ($((SECONDS - t0)) s)"
OUT=$out/san SECONDS_EACH=100 RACECHECK='*/rows:*/rows_mma:*rows_mblock:*rows_mma_mblock' \
  MEMCHECK='gpu_linear.activation_linear_refuses*' bash bench/h200_sanitize.sh
grep -c "^\[       OK" "$out/san/racecheck.log"
echo "== profiles ($((SECONDS - t0)) s)"
OUT=$out/prof timeout 50 bash bench/h200_profile.sh nh056-decode1 2>&1 | tail -26
OUT=$out/prof-pdl0 MSTAR_PDL=0 timeout 50 bash bench/h200_profile.sh nh056-decode1 2>&1 | tail -26
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== split chunk sweep ($((SECONDS - t0)) s)"
for c in 0 64 128 256 512; do
  for walk in 0 3 5; do
    MSTAR_ATTN_SPLIT_MIN_CHUNK=$c MSTAR_ATTN_DECODE_WALK=$walk timeout 40 "$bin/mstar-gpu-bench" \
      --suite attention --rows 1 4 16 --prefill-rows 1 --graphs --rounds 5 --json |
      grep '^{' | grep decode | sed "s/^{/{\"min_chunk\": $c, \"walk_env\": $walk, /" >>"$out/split-chunk.jsonl"
  done
done
python3 - "$out/split-chunk.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(r["min_chunk"], r["walk_env"], f"{r['case']:36s} {r['us_per_call']:9.2f}", r.get("walk", ""))
PY
echo "== 0.56B batch 1 by min chunk ($((SECONDS - t0)) s)"
for rep in 1 2; do
  for c in 0 128 256; do
    for pl in 32 2048; do
      MSTAR_ATTN_SPLIT_MIN_CHUNK=$c timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
        --batch 1 --prompt-len $pl --new-tokens 128 --repeats 2 --json 2>/dev/null | grep '^{"batch' |
        sed "s/^{/{\"min_chunk\": $c, /" >>"$out/nh056-b1-chunk.jsonl"
    done
  done
done
python3 - "$out/nh056-b1-chunk.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("min_chunk", r["min_chunk"], "prompt", r["prompt_len"], "step_ms %.4f" % r["step_ms"],
          {x: round(v, 4) for x, v in r["roofline_decode"].items() if "fraction" in x})
PY
echo "== done ($((SECONDS - t0)) s)"
mkdir -p "$final"
cp "$out/gpu-tests-rest.log" "$out/split-chunk.jsonl" "$out/nh056-b1-chunk.jsonl" "$final/"
tar czf "$final/call2.tgz" -C "$out" san prof prof-pdl0
ls -la "$final"
