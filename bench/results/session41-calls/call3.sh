#!/usr/bin/env bash
# Session 41's third call: the decode attention's split and merge inside the 0.56B's batch-1 step
# (the microbenchmark measures them alone, without the chained kernels around them): the
# default (split, block merge kernel at one row), MSTAR_ATTN_SPLIT_MERGE=2 (fused merge, no merge
# kernel) and MSTAR_ATTN_SPLITS=1 (no split), alternated, at 32-token prompts (batch 1 / 4) and
# 2,048-token prompts (batch 1). Everything under $OUT/call3.tgz. After PACK_XZ=1
# scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out
w=$(mktemp -d)
t0=$SECONDS
left() { echo $((500 - (SECONDS - t0))); }
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
summary() {  # MODE FILE
  python3 - "$1" "$2" <<'PY'
import json, sys
for l in open(sys.argv[2]):
    if l.startswith("{"):
        r = json.loads(l); d = r["roofline_decode"]
        print(f"{sys.argv[1]:8} p{r['prompt_len']:<5} b{r['batch']:<3} step {r['step_ms']*1000:7.1f} us  roofline {d['bandwidth_fraction']:.3f}  digest {r['tokens_digest']}")
PY
}
run() {  # MODE PROMPT NEW BATCHES...
  local mode=$1 prompt=$2 new=$3
  shift 3
  local f=$w/nh056-$mode-p$prompt-$RANDOM.jsonl
  local envs=()
  case $mode in
    merge2) envs=(MSTAR_ATTN_SPLIT_MERGE=2) ;;
    splits1) envs=(MSTAR_ATTN_SPLITS=1) ;;
  esac
  env "${envs[@]}" timeout 90 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch "$@" \
    --prompt-len "$prompt" --new-tokens "$new" --repeats 3 --json >"$f" 2>"$f.err"
  summary "$mode" "$f"
}
for rep in 1 2; do
  for mode in default merge2 splits1; do
    (($(left) > 40)) && run $mode 32 128 1 4
  done
done
for mode in default merge2 splits1; do
  (($(left) > 60)) && run $mode 2048 128 1
done
rm -rf "$ck"
tar czf "$final/call3.tgz" -C "$w" .
echo "== done ($((SECONDS - t0)) s)"
