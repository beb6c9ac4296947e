#!/usr/bin/env bash
# Session 33's third call: what a chained GEMV does before its wait (MSTAR_GEMV_CHAIN loads / prefetch / late,
# MSTAR_PDL=0 plain) on the 0.56B, the 8B shape and Qwen3.5 at batch 1, the 0.56B at 64 / 256 rows on the overlap
# schedule; the sampling / model GPU tests (argmax over a cluster); then the rooflines on the defaults.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu mstar-run; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out; out=$(mktemp -d); export OUT=$out
t0=$SECONDS
echo "== GPU tests"
timeout 120 "$bin/mstar_gpu_tests" --gtest_filter='gpu_sampling*:*chained*:gpu_model*:gpu_linear.*' \
  >"$out/gpu-tests.log" 2>&1; echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED " "$out/gpu-tests.log" | head -12
timeout 60 "$bin/mstar-gpu-bench" --suite argmax --json >"$out/argmax.jsonl" 2>&1
python3 - "$out/argmax.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print(r.get("case"), {k: round(v, 3) for k, v in r.items() if isinstance(v, float)})
PY
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-60
python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" >/dev/null 2>&1
bm() { timeout 60 "$bin/mstar-bench-model-gpu" "$@" --json 2>/dev/null | grep '^{'; }
ab() {  # NAME FILE ARGS...: each mode of a chained GEMV, then plain launches
  local name=$1 file=$2; shift 2
  for mode in loads prefetch late; do
    MSTAR_GEMV_CHAIN=$mode bm "$@" | sed "s/^{/{\"run\": \"$name $mode\", /" >>"$file"
  done
  MSTAR_PDL=0 bm "$@" | sed "s/^{/{\"run\": \"$name plain\", /" >>"$file"
}
echo "== batch 1 ($((SECONDS - t0)) s)"
for r in 1 2; do
  ab "0.56b-$r" "$out/b1.jsonl" --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 128 --repeats 3
  ab "qwen-$r" "$out/b1.jsonl" --model "$ck/qwen" --batch 1 --prompt-len 32 --new-tokens 128 --repeats 3
done
ab "0.56b overlap" "$out/b64.jsonl" --model "$ck/nh056" --batch 64 256 --prompt-len 32 --new-tokens 128 \
  --repeats 3 --schedule overlap
rm -rf "$ck/qwen"
echo "== 8B ($((SECONDS - t0)) s)"
python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" 2>&1 | tail -1 | cut -c1-60
ab "8b" "$out/b1.jsonl" --model "$ck/nh8b" --batch 1 --prompt-len 32 --new-tokens 64 --repeats 2
rm -rf "$ck"
python3 - "$out"/b1.jsonl "$out"/b64.jsonl <<'PY'
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        rd = r.get("roofline_decode", {})
        print(r["run"], "b", r["batch"], "step_ms %.4f" % r["step_ms"], "busy_us %.1f" % r["device_busy_us_median"],
              "bw %.3f" % rd.get("bandwidth_fraction", 0), r.get("chained_launches"), r["tokens_digest"])
PY
echo "done ($((SECONDS - t0)) s)"
tar czf "$final/call3.tgz" -C "$out" .
