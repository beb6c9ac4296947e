#!/usr/bin/env bash
# The gated delta rule's decode launch shapes on an H200 (the device machine),
# results under $OUT: the rule's GPU tests (gpu-tests.log), then every decode
# variant of kernels/cuda/delta_rule.cu (MSTAR_DELTA_DECODE_VARIANT=0..13) and
# the default choice, at 1..256 rows, timed as CUDA graphs of back-to-back
# calls (`mstar-gpu-bench --graphs`: the device's time, as in a captured
# decode step) into decode-sweep.jsonl; the default also launched one by one;
# then flash-linear-attention's kernels (bench/fla_delta_rule.py, its wheels
# under .whl/) eager, one call a graph and 20 calls a graph (fla.jsonl).
# Needs scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench (.carry).
#   bash bench/h200_delta_decode.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/env.txt"
echo "== GPU tests"
timeout 150 "$bin/mstar_gpu_tests" --gtest_filter='gpu_delta_rule.*:*qwen3_5*' >"$out/gpu-tests.log" 2>&1
echo "exit $?" | tee -a "$out/gpu-tests.log"
grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|tests ran" "$out/gpu-tests.log"
batches=(1 4 16 32 64 128 256)
sweep=$out/decode-sweep.jsonl
: >"$sweep"
tag() {  # VARIANT TIMING: each JSON line of stdin with the two fields added
  sed -e "s/^{/{\"variant\": \"$1\", \"timing\": \"$2\", /"
}
"$bin/mstar-gpu-bench" --delta-decode-only --delta-batches "${batches[@]}" --rounds 7 --json \
  | tag default eager >>"$sweep"
"$bin/mstar-gpu-bench" --delta-decode-only --delta-batches "${batches[@]}" --rounds 7 --json \
  --graphs | tag default graph >>"$sweep"
for v in $(seq 0 13); do
  MSTAR_DELTA_DECODE_VARIANT=$v "$bin/mstar-gpu-bench" --delta-decode-only \
    --delta-batches "${batches[@]}" --rounds 7 --json --graphs | tag "$v" graph >>"$sweep"
done
python3 - "$sweep" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cases = sorted({r["case"] for r in rows}, key=lambda n: int(n.rsplit("b", 1)[1]))
print("variant/timing " + " ".join(f"{c.rsplit('_', 1)[1]:>8s}" for c in cases))
for key in dict.fromkeys((r["variant"], r["timing"]) for r in rows):
    us = {r["case"]: r["us_per_call"] for r in rows if (r["variant"], r["timing"]) == key}
    print(f"{key[0]:>7s} {key[1]:6s} " + " ".join(f"{us.get(c, 0):8.2f}" for c in cases))
PY
echo "== fla"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$root"/.whl/*.whl && export PYTHONPATH=/tmp/site
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' \
  | tee -a "$out/env.txt"
timeout 240 python3 "$root/bench/fla_delta_rule.py" --json >"$out/fla.jsonl"
python3 - "$out/fla.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        print(f"{r['name']:28s} {r['dtype']:9s} {r['mode']:8s} {r['us_per_call']:9.2f} us")
PY
