#!/usr/bin/env bash
# Session 32's second call: the batch-1 norm fold (rms_norm_linear_bf16, accumulating GEMVs) -- every GPU test, then
# Nemotron-H 0.56B and 8B-shape decode at batch 1 with the fold off (MSTAR_FUSED_NORM=0) and on, same process tree.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== every GPU test"
timeout 150 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED |fused|gpu_linear" "$out/gpu-tests.log" | head -20
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1
for f in 0 1 0 1; do
  MSTAR_FUSED_NORM=$f timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 --prompt-len 32 \
    --new-tokens 128 --repeats 3 --json | grep '^{' | sed "s/^{/{\"fused\": $f, /" >>"$out/nh056-b1.jsonl"
done
echo "== 8b ($((SECONDS - t0)) s)"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" 2>&1 | tail -1
for f in 0 1; do
  MSTAR_FUSED_NORM=$f timeout 100 "$bin/mstar-bench-model-gpu" --model "$ck/nh8b" --batch 1 --prompt-len 32 \
    --new-tokens 64 --repeats 2 --json | grep '^{' | sed "s/^{/{\"fused\": $f, /" >>"$out/nh8b-b1.jsonl"
done
rm -rf "$ck"
python3 - "$out" <<'PY'
import json, sys
for f in ("nh056-b1.jsonl", "nh8b-b1.jsonl"):
    for l in open(sys.argv[1] + "/" + f):
        r = json.loads(l)
        rd = r.get("roofline_decode", {})
        print(f, "fused", r["fused"], "batch", r.get("batch"), {k: v for k, v in r.items() if "step" in k or "tok" in k}, json.dumps(rd)[:300])
PY
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call2.tgz" -C "$out" .
