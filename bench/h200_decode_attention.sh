#!/usr/bin/env bash
# The paged decode attention's variants on an H200 (the device machine),
# results under $OUT:
#   gpu-tests.log     mstar_gpu_tests --gtest_filter='*attention*': every walk
#                     (regs, cp4, cp2, mma, rows, rows_mma) and split merge (mwarp, mblock, mfused) forced
#                     against the CPU reference
#   variants.jsonl    mstar-gpu-bench --suite attention --attn-variants
#                     --graphs at 1..256 rows of 2,048 positions (bf16, 32 q /
#                     8 kv heads, D 128): the default cases, then every walk
#                     one pass and every (walk, merge) split, the variant in
#                     the case name (kernels/cuda/attention_variant.cpp)
#   env.jsonl         the default cases again with MSTAR_ATTN_DECODE_WALK and
#                     MSTAR_ATTN_SPLIT_MERGE set, each line tagged with them:
#                     the environment must reach the kernels (its `walk` /
#                     `merge` extras equal to the variables)
#   resource-usage.txt  cuobjdump --dump-resource-usage of the attention
#                     kernels (registers, spills, shared memory), if the
#                     device has cuobjdump
# Then the table: us a call per variant and rows.
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench (.carry).
#   bash bench/h200_decode_attention.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
echo "== GPU tests"
timeout 240 "$bin/mstar_gpu_tests" --gtest_filter='*attention*' >"$out/gpu-tests.log" 2>&1
echo "exit $?" | tee -a "$out/gpu-tests.log"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran|normalised error" "$out/gpu-tests.log" \
  | sort | uniq -c | sort -rn | head -20
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-resource-usage "$bin/mstar-gpu-bench" 2>&1 \
    | grep -A1 -E "attend_(fast|split|decode_mma|decode_rows)|merge_splits" >"$out/resource-usage.txt"
fi
rows=(1 2 4 8 16 32 64 128 256)
echo "== variants"
timeout 300 "$bin/mstar-gpu-bench" --suite attention --rows "${rows[@]}" --prefill-rows 1 \
  --attn-variants --graphs --rounds 7 --json >"$out/variants.jsonl"
echo "exit $?"
echo "== environment"
for v in "0 0" "1 1" "2 1" "3 1" "4 1" "5 1"; do
  set -- $v
  MSTAR_ATTN_DECODE_WALK=$1 MSTAR_ATTN_SPLIT_MERGE=$2 timeout 100 "$bin/mstar-gpu-bench" \
    --suite attention --rows 1 64 --prefill-rows 1 --graphs --rounds 5 --json \
    | sed -e "s/^{/{\"env_walk\": $1, \"env_merge\": $2, /"
done >"$out/env.jsonl"
python3 - "$out/variants.jsonl" "$out/env.jsonl" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
dec = [r for r in rows if r["case"].startswith("decode_attention")]
batches = sorted({int(r["rows"]) for r in dec})
variants = list(dict.fromkeys(re.sub(r"_b\d+$", "", r["case"]) for r in dec))
us = {r["case"]: r["us_per_call"] for r in dec}
print(f"{'us a call':34s}" + "".join(f"{'b' + str(b):>9s}" for b in batches))
for v in variants:
    print(f"{v:34s}" + "".join(
        f"{us[f'{v}_b{b}']:9.2f}" if f"{v}_b{b}" in us else f"{'-':>9s}" for b in batches))
splits = {int(r["rows"]): int(r["splits"]) for r in dec if r["case"].startswith("decode_attention_split_b")}
print("splits (default walk):", " ".join(f"b{b}:{s}" for b, s in sorted(splits.items())))
bad = []
for l in open(sys.argv[2]):
    if not l.startswith("{"):
        continue
    r = json.loads(l)
    if not r["case"].startswith("decode_attention"):
        continue
    if r["walk"] != r["env_walk"] or ("merge" in r and r["merge"] != r["env_merge"]):
        bad.append(r["case"])
print("environment reached the kernels" if not bad else f"environment ignored: {bad}")
PY
