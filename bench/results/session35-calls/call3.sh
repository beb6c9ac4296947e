#!/usr/bin/env bash
# Session 35's third call: main with the new attention defaults (rows walk from 64 decode rows,
# wgmma prefill) and the b1 folds. The attention and model GPU tests on the defaults; the SSD scan
# of short rows three ways (default threshold, sequential, every row chunked) at 1 / 8 / 64 / 256
# rows of 16 / 32 / 64 tokens; the 0.56B decode and prefill on the new defaults and on the old
# attention kernels (MSTAR_ATTN_DECODE_WALK=0 MSTAR_ATTN_PREFILL=mma), alternating.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
timeout 200 "$bin/mstar_gpu_tests" --gtest_filter='*attention*:gpu_model*:gpu_qwen3_5*' >"$out/tests.log" 2>&1
echo "== tests: exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$out/tests.log" | head -12
echo "== SSD short rows ($((SECONDS - t0)) s)"
for len in 16 32 64; do
  timeout 60 "$bin/mstar-gpu-bench" --suite ssd --prefill-rows 1 8 64 256 --prefill-context $len \
    --graphs --rounds 5 --json | grep '^{' >>"$out/ssd-short.jsonl"
done
python3 - "$out/ssd-short.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["case"].startswith("ssd_scan"):
        print(f"{r['case']:40s} {r['us_per_call']:10.2f}")
PY
echo "== 0.56B, new defaults / old attention ($((SECONDS - t0)) s)"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-100
for run in new old new old; do
  if [[ $run == old ]]; then export MSTAR_ATTN_DECODE_WALK=0 MSTAR_ATTN_PREFILL=mma
  else unset MSTAR_ATTN_DECODE_WALK MSTAR_ATTN_PREFILL; fi
  timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 64 256 --prompt-len 32 \
    --new-tokens 128 --repeats 3 --json | grep '^{' | sed "s/^{/{\"attn\": \"$run\", /" >>"$out/nh056-decode.jsonl"
  timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 8 --prompt-len 2048 \
    --new-tokens 2 --repeats 3 --json | grep '^{' | sed "s/^{/{\"attn\": \"$run\", /" >>"$out/nh056-prefill.jsonl"
done
unset MSTAR_ATTN_DECODE_WALK MSTAR_ATTN_PREFILL
timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 --prompt-len 32 \
  --new-tokens 128 --repeats 3 --json | grep '^{' | sed "s/^{/{\"attn\": \"new\", /" >>"$out/nh056-decode.jsonl"
rm -rf "$ck"
python3 - "$out/nh056-decode.jsonl" "$out/nh056-prefill.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        k = "roofline_prefill" if "prefill" in f else "roofline_decode"
        rf = r[k]
        frac = rf["compute_fraction"] if "prefill" in f else rf["bandwidth_fraction"]
        print(f.rsplit("/", 1)[1], r["attn"], "batch", r["batch"], "step_ms %.4f" % r["step_ms"],
              "t1 %.2f ms" % (1e3 * min(r["t1_s"])), "fraction %.4f" % frac, r.get("tokens_digest"))
PY
echo "== done ($((SECONDS - t0)) s)"
tar czf "$final/call3.tgz" -C "$out" .
