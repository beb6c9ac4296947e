#!/usr/bin/env bash
# The few-row GEMV (kernels/cuda/gemv.cu) on an H200 (the device machine),
# results under $OUT:
#   gemv.jsonl      mstar-gpu-bench --suite gemm at 1 / 4 / 8 rows, graphs:
#                   cuBLAS (gemm_*) beside linear_bf16 (linear_bf16_*), the
#                   0.56B and 8B Nemotron-H projections
#   e2e.jsonl       mstar-bench-model-gpu, the GEMV on (MSTAR_GEMV=1) and off
#                   (0): Nemotron-H 0.56B (bench/make_checkpoint.py) decode at
#                   batch 1 / 4 with its roofline, Qwen3.5 ~0.56B decode at 1 /
#                   16 and its 8 x 2048 prefill (SwiGLU in one pass since
#                   0167925: h200-qwen3_5-e2e.md had 158.6 ms)
# Needs scripts/pack-device.sh mstar-gpu-bench mstar-bench-model-gpu (.carry).
#   bash bench/h200_gemv.sh
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 150 "$bin/mstar-gpu-bench" --suite gemm --gemm-m 1 4 8 --graphs --rounds 7 --json \
  >"$out/gemv.jsonl"
python3 - "$out/gemv.jsonl" <<'PY'
import json, sys
rows = {json.loads(l)["case"]: json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")}
for name, r in rows.items():
    if name.startswith("gemm_"):
        o = rows.get("linear_bf16_" + name[5:])
        if o:
            print(f"{name[5:]:24s} cublas {r['us_per_call']:8.2f} us {r['GB_per_s']:6.0f} GB/s"
                  f"  ours {o['us_per_call']:8.2f} us {o['GB_per_s']:6.0f} GB/s"
                  f"  x{r['us_per_call'] / o['us_per_call']:.2f}")
PY
ck=$(mktemp -d)
python3 "$root/bench/make_checkpoint.py" --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null
python3 "$root/bench/transformers_decode.py" make-checkpoint --size qwen3_5-0.5b --out "$ck/q05" \
  >/dev/null
tag() { sed -e "s/^{/{\"gemv\": $1, \"model\": \"$2\", /"; }
for g in 1 0; do
  MSTAR_GEMV=$g timeout 100 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 4 \
    --prompt-len 32 --new-tokens 128 --repeats 3 --json | tag $g nh056
  MSTAR_GEMV=$g timeout 100 "$bin/mstar-bench-model-gpu" --model "$ck/q05" --batch 1 16 \
    --prompt-len 32 --new-tokens 64 --repeats 3 --json | tag $g q05
done >"$out/e2e.jsonl"
timeout 100 "$bin/mstar-bench-model-gpu" --model "$ck/q05" --batch 8 --prompt-len 2048 \
  --new-tokens 2 --repeats 3 --json | tag 1 q05-prefill >>"$out/e2e.jsonl"
python3 - "$out/e2e.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    if not l.startswith("{"):
        continue
    r = json.loads(l)
    roof = r.get("roofline_decode", {})
    print(f"{r['model']:12s} gemv={r['gemv']} batch {r['batch']:3d} step {r.get('step_ms') or 0:7.3f} ms"
          f"  {r.get('decode_tokens_per_s') or 0:9.0f} tok/s  bw {roof.get('bandwidth_fraction', 0):.3f}"
          f"  t1 {min(r.get('t1_s', [0])) * 1e3:8.2f} ms  digest {r.get('tokens_digest')}")
PY
rm -rf "$ck"
