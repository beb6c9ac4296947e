#!/usr/bin/env bash
# Session 33's second call (main c9dbb9c+: chained launches): every GPU test, then A/B of chained launches
# (MSTAR_PDL=0 off) on the 0.56B at 1 / 64 / 256 rows (sync and overlap schedules), Qwen3.5 ~0.5B and the 8B
# shape at batch 1 / 64, and a memcheck of the chained model tests.
# After scripts/pack-device.sh mstar_gpu_tests mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== every GPU test"
timeout 200 "$bin/mstar_gpu_tests" >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED |chained.*(OK|FAILED)" "$out/gpu-tests.log" | head -24
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-80
bm() { timeout 60 "$bin/mstar-bench-model-gpu" "$@" --json 2>/dev/null | grep '^{'; }
echo "== 0.56B A/B ($((SECONDS - t0)) s)"
for r in 1 2; do
  for pdl in 0 1; do
    MSTAR_PDL=$pdl bm --model "$ck/nh056" --batch 1 64 256 --prompt-len 32 --new-tokens 128 --repeats 3 \
      | sed "s/^{/{\"run\": \"pdl $pdl sync $r\", /" >>"$out/nh056.jsonl"
  done
done
for pdl in 0 1; do
  MSTAR_PDL=$pdl bm --model "$ck/nh056" --batch 1 64 256 --prompt-len 32 --new-tokens 128 --repeats 3 \
    --schedule overlap | sed "s/^{/{\"run\": \"pdl $pdl overlap\", /" >>"$out/nh056.jsonl"
done
echo "== qwen ($((SECONDS - t0)) s)"
python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" >/dev/null 2>&1
for pdl in 0 1 0 1; do
  MSTAR_PDL=$pdl bm --model "$ck/qwen" --batch 1 64 --prompt-len 32 --new-tokens 128 --repeats 3 \
    | sed "s/^{/{\"run\": \"qwen pdl $pdl\", /" >>"$out/qwen.jsonl"
done
rm -rf "$ck/qwen"
echo "== 8B ($((SECONDS - t0)) s)"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" 2>&1 | tail -1 | cut -c1-80
for pdl in 0 1 0 1; do
  MSTAR_PDL=$pdl bm --model "$ck/nh8b" --batch 1 64 --prompt-len 32 --new-tokens 64 --repeats 2 \
    | sed "s/^{/{\"run\": \"8b pdl $pdl\", /" >>"$out/nh8b.jsonl"
done
rm -rf "$ck"
python3 - "$out"/nh056.jsonl "$out"/qwen.jsonl "$out"/nh8b.jsonl <<'PY'
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        rd = r.get("roofline_decode", {})
        print(r["run"], "b", r["batch"], "step_ms %.4f" % r["step_ms"], "busy_us %.1f" % r["device_busy_us_median"],
              "gap_us %.1f" % r["idle_gap_us_median"], "bw %.3f" % rd.get("bandwidth_fraction", 0),
              "busy_bw %.3f" % rd.get("bandwidth_fraction_device_busy", 0), r.get("chained_launches"), r["tokens_digest"])
PY
echo "== memcheck ($((SECONDS - t0)) s)"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 120 "$cs" --tool memcheck --error-exitcode 9 "$bin/mstar_gpu_tests" --gtest_filter='*chained*' \
  >"$out/memcheck.log" 2>&1; echo "memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head -5
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call2.tgz" -C "$out" .
