#!/usr/bin/env bash
# Session 34's second call: main with ssd-scan4 (the state walk, default) and decode-attn4 (the
# tensor-core decode walk, selectable) merged. The attention, rank-process and chunked SSD GPU tests;
# the decode attention's variants (every walk, one pass and split, in the same run); the 0.56B decode at
# batch 1 / 64 / 256 with the default walk and with MSTAR_ATTN_DECODE_WALK=3 (mma); 2,048-token
# prefill at batch 1 / 8 (the walk).
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== GPU tests: attention, rank processes, chunked SSD"
timeout 200 "$bin/mstar_gpu_tests" --gtest_filter='*attention*:gpu_rank_processes.*:gpu_recurrent.ssd_chunked*' \
  >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED |over socket" "$out/gpu-tests.log" | head -20
echo "== attention variants ($((SECONDS - t0)) s)"
timeout 150 "$bin/mstar-gpu-bench" --suite attention --rows 1 4 16 64 256 --prefill-rows 1 \
  --attn-variants --graphs --rounds 5 --json | grep '^{' >"$out/attn-variants.jsonl"
python3 - "$out/attn-variants.jsonl" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
dec = [r for r in rows if r["case"].startswith("decode_attention")]
batches = sorted({int(r["rows"]) for r in dec})
variants = list(dict.fromkeys(re.sub(r"_b\d+$", "", r["case"]) for r in dec))
us = {r["case"]: r["us_per_call"] for r in dec}
print(f"{'us a call':36s}" + "".join(f"{'b' + str(b):>9s}" for b in batches))
for v in variants:
    print(f"{v:36s}" + "".join(f"{us[f'{v}_b{b}']:9.2f}" if f"{v}_b{b}" in us else f"{'-':>9s}" for b in batches))
PY
echo "== 0.56B decode and prefill ($((SECONDS - t0)) s)"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-100
for w in default 3; do
  if [[ $w == default ]]; then unset MSTAR_ATTN_DECODE_WALK; else export MSTAR_ATTN_DECODE_WALK=$w; fi
  timeout 100 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 64 256 --prompt-len 32 \
    --new-tokens 128 --repeats 3 --json | grep '^{' | sed "s/^{/{\"walk\": \"$w\", /" >>"$out/nh056-decode.jsonl"
done
unset MSTAR_ATTN_DECODE_WALK
timeout 100 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 8 --prompt-len 2048 \
  --new-tokens 2 --repeats 3 --json | grep '^{' >"$out/nh056-prefill.jsonl"
rm -rf "$ck"
python3 - "$out/nh056-decode.jsonl" "$out/nh056-prefill.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        k = "roofline_prefill" if "prefill" in f else "roofline_decode"
        rf = r.get(k, {})
        print(f.rsplit("/", 1)[1], r.get("walk", ""), "batch", r.get("batch"), "step_ms %.4f" % r.get("step_ms", 0),
              {x: rf[x] for x in rf if "fraction" in x}, r.get("tokens_digest", ""))
PY
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call2.tgz" -C "$out" .
