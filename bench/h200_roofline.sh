#!/usr/bin/env bash
# Issue 17's roofline runs on an H200 (the device machine), results under $OUT:
#   gemm.jsonl           mstar-gpu-bench --suite gemm: cuBLAS bf16 GEMM TFLOP/s
#                        on the 0.56B / 8B projection shapes (the peak reference)
#   nh056-decode.jsonl   mstar-bench-model-gpu on a random Nemotron-H 0.56B
#                        (bench/make_checkpoint.py): decode at batch 1/64/256 on
#                        the engine's own schedule (overlap on a GPU: step N+1
#                        built while N runs), each line with roofline_decode
#                        (bytes per step over the copy bandwidth, FLOPs over the
#                        GEMM peak, same run)
#   nh056-decode-sync.jsonl  the same on the sync schedule (the host's gap
#                        between steps in every step)
#   nh056-prefill.jsonl  the same, 2,048-token prompts at batch 1 and 8
#                        (roofline_prefill)
#   nh8b.log             the 8B shape: the time make_checkpoint.py takes
#                        (goal: under 2 minutes), mstar-run's start-up memory
#                        report at 8,192 tokens of context, decode at batch
#                        1/64/256, prefill of 2,048-token prompts at batch 1/8
# Needs scripts/pack-device.sh mstar-gpu-bench mstar-bench-model-gpu mstar-run
# (.carry, binaries unpacked under .carry/bin).
#   bash bench/h200_roofline.sh [--no-8b]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
ck=$(mktemp -d)
echo "== gemm"
timeout 90 "$bin/mstar-gpu-bench" --suite gemm --json >"$out/gemm.jsonl"
tail -3 "$out/gemm.jsonl" | cut -c1-200
echo "== nemotron_h-0.56b"
python3 "$root/bench/make_checkpoint.py" --size nemotron_h-0.56b --out "$ck/nh056" | tail -1
timeout 150 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 64 256 --prompt-len 32 \
  --new-tokens 128 --repeats 3 --json >"$out/nh056-decode.jsonl"
timeout 150 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 64 256 --prompt-len 32 \
  --new-tokens 128 --repeats 3 --schedule sync --json >"$out/nh056-decode-sync.jsonl"
timeout 120 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 8 --prompt-len 2048 \
  --new-tokens 2 --repeats 3 --json >"$out/nh056-prefill.jsonl"
python3 - "$out/nh056-decode.jsonl" "$out/nh056-decode-sync.jsonl" "$out/nh056-prefill.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    for l in open(f):
        if not l.startswith("{"):
            continue
        r = json.loads(l)
        for k in ("roofline_decode", "roofline_prefill"):
            if k in r and ("prefill" in f) == (k == "roofline_prefill"):
                print(f.rsplit("/", 1)[1], r.get("batch"), k, json.dumps(r[k])[:400])
PY
[[ ${1:-} == --no-8b ]] && exit 0
echo "== nemotron_h-8b" | tee "$out/nh8b.log"
start=$(date +%s%N)
python3 "$root/bench/make_checkpoint.py" --size nemotron_h-8b --out "$ck/nh8b" 2>&1 | tail -2 | tee -a "$out/nh8b.log"
echo "make_checkpoint 8b: $((($(date +%s%N) - start) / 1000000)) ms" | tee -a "$out/nh8b.log"
timeout 120 "$bin/mstar-run" --model "$ck/nh8b" --device cuda --context 8192 \
  --prompt-ids 5,17,301,42 --max-tokens 4 2>&1 | grep -iE "memory|pages|slots|weights|requests|error" \
  | head -12 | tee -a "$out/nh8b.log"
timeout 200 "$bin/mstar-bench-model-gpu" --model "$ck/nh8b" --batch 1 64 256 --prompt-len 32 \
  --new-tokens 64 --repeats 2 --json 2>&1 | tee -a "$out/nh8b.log" | grep '^{' | cut -c1-600
timeout 200 "$bin/mstar-bench-model-gpu" --model "$ck/nh8b" --batch 1 8 --prompt-len 2048 \
  --new-tokens 2 --repeats 2 --json 2>&1 | tee -a "$out/nh8b.log" | grep '^{' | cut -c1-600
rm -rf "$ck"
