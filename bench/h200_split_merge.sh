#!/usr/bin/env bash
# The split-KV decode attention's merges on an H200 (the device machine):
# the merge kernels (0 warp, 1 block) against the fused merge (2: each
# item's last split block merges, no second kernel), and the split count
# forced where the rule declines. Results under $OUT:
#   gpu-tests.log   the fused merge's tests (bit for bit against the block
#                   merge, repeats, graph replays) and the split tests with
#                   every (walk, merge) against the CPU reference
#   merges.jsonl    mstar-gpu-bench --suite attention --graphs at 1 4 8 16
#                   32 rows of 2,048 positions (bf16, 32 q / 8 kv heads, D
#                   128) under MSTAR_ATTN_SPLIT_MERGE=0 / 1 / 2, each line
#                   tagged with env_merge
#   variants.jsonl  the same rows with --attn-variants: every (walk, merge)
#                   forced in one process, mfused included
#   splits.jsonl    64 rows under MSTAR_ATTN_SPLITS=1 / 2 / 4 (1: one pass)
#                   with the block and the fused merge, tagged env_splits
#   resource-usage.txt  cuobjdump --dump-resource-usage of the split kernels
#                   and merges (the fused instantiations end in Lb1), if the
#                   device has cuobjdump
# Then the tables: us a call per merge and rows, and the 64-row sweep.
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench (.carry).
#   bash bench/h200_split_merge.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
# SKIP_GPU_TESTS=1: the benches only (a call that ran the whole mstar_gpu_tests first).
if [[ ${SKIP_GPU_TESTS:-0} != 1 ]]; then
  echo "== GPU tests"
  timeout 300 "$bin/mstar_gpu_tests" \
    --gtest_filter='*attention_fused_merge*:*split_variant*:gpu_attention.split*' \
    >"$out/gpu-tests.log" 2>&1
  echo "exit $?" | tee -a "$out/gpu-tests.log"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran" "$out/gpu-tests.log" \
    | sort | uniq -c | sort -rn | head -20
fi
if command -v cuobjdump >/dev/null; then
  cuobjdump --dump-resource-usage "$bin/mstar-gpu-bench" 2>&1 \
    | grep -A1 -E "attend_(split|decode_mma|decode_rows_mma)|merge_splits" >"$out/resource-usage.txt"
fi
rows=(1 4 8 16 32)
echo "== merges"
for m in 0 1 2; do
  MSTAR_ATTN_SPLIT_MERGE=$m timeout 150 "$bin/mstar-gpu-bench" --suite attention \
    --rows "${rows[@]}" --prefill-rows 1 --graphs --rounds 7 --json \
    | sed -e "s/^{/{\"env_merge\": $m, /"
done >"$out/merges.jsonl"
echo "== variants"
timeout 300 "$bin/mstar-gpu-bench" --suite attention --rows "${rows[@]}" --prefill-rows 1 \
  --attn-variants --graphs --rounds 7 --json >"$out/variants.jsonl"
echo "exit $?"
echo "== split count at 64 rows"
for n in 1 2 4; do
  for m in 1 2; do
    MSTAR_ATTN_SPLITS=$n MSTAR_ATTN_SPLIT_MERGE=$m timeout 100 "$bin/mstar-gpu-bench" \
      --suite attention --rows 64 --prefill-rows 1 --graphs --rounds 7 --json \
      | sed -e "s/^{/{\"env_splits\": $n, \"env_merge\": $m, /"
  done
done >"$out/splits.jsonl"
python3 - "$out/merges.jsonl" "$out/variants.jsonl" "$out/splits.jsonl" <<'PY'
import json, re, sys
def load(path):
    return [json.loads(l) for l in open(path) if l.startswith("{")]
merges = [r for r in load(sys.argv[1]) if r["case"].startswith("decode_attention_split_b")]
batches = sorted({int(r["rows"]) for r in merges})
print("default split case, us a call (merge reached: the `merge` extra)")
print(f"{'merge':10s}" + "".join(f"{'b' + str(b):>9s}" for b in batches))
for m in (0, 1, 2):
    us = {int(r["rows"]): (r["us_per_call"], int(r["merge"]), int(r["splits"]))
          for r in merges if r["env_merge"] == m}
    print(f"{m:<10d}" + "".join(
        f"{us[b][0]:9.2f}" if b in us else f"{'-':>9s}" for b in batches)
        + "   merge " + " ".join(str(us[b][1]) for b in batches if b in us)
        + "   splits " + " ".join(str(us[b][2]) for b in batches if b in us))
var = [r for r in load(sys.argv[2]) if r["case"].startswith("decode_attention_split_")]
names = list(dict.fromkeys(re.sub(r"_b\d+$", "", r["case"]) for r in var))
us = {r["case"]: r["us_per_call"] for r in var}
print(f"\n{'forced (walk, merge)':34s}" + "".join(f"{'b' + str(b):>9s}" for b in batches))
for v in names:
    print(f"{v:34s}" + "".join(
        f"{us[f'{v}_b{b}']:9.2f}" if f"{v}_b{b}" in us else f"{'-':>9s}" for b in batches))
print("\n64 rows: MSTAR_ATTN_SPLITS x merge, us a call (splits taken)")
for r in load(sys.argv[3]):
    if r["case"] in ("decode_attention_b64", "decode_attention_split_b64"):
        print(f"  splits={r['env_splits']} merge={r['env_merge']} {r['case']:28s}"
              f" {r['us_per_call']:9.2f}  ({int(r.get('splits', 1))})")
PY
