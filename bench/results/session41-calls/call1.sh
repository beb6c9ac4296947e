#!/usr/bin/env bash
# Session 41's first call: the L2 prefetch of each layer's last product's weights at few-row
# decode (kernels/cuda/l2_prefetch.cu): its kernel and model tests, then the 0.56B (and, time
# left, the 8B) at batch 1 / 4 under MSTAR_L2_PREFETCH=0 / bulk (default) / lines, alternating.
# After PACK_XZ=1 scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu;
# carry .carry.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out
t0=$SECONDS
left() { echo $((560 - (SECONDS - t0))); }
echo "== GPU tests: math, model"
timeout 150 "$bin/mstar_gpu_tests" --gtest_filter='gpu_math.*:gpu_model*' >"$final/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$final/tests.log"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
summary() {  # MODE FILE
  python3 - "$1" "$2" <<'PY'
import json, sys
for l in open(sys.argv[2]):
    if l.startswith("{"):
        r = json.loads(l); d = r["roofline_decode"]
        print(f"{sys.argv[1]:6} b{r['batch']:<3} step {r['step_ms']*1000:7.1f} us  roofline {d['bandwidth_fraction']:.3f}  busy {r['device_busy_us_median']:.1f} us  digest {r['tokens_digest']}")
PY
}
echo "== 0.56B batch 1 / 4 ($((SECONDS - t0)) s)"
for rep in 1 2 3; do
  for mode in 0 bulk lines; do
    f=$final/nh056-$mode-$rep.jsonl
    MSTAR_L2_PREFETCH=$mode timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 4 \
      --prompt-len 32 --new-tokens 128 --repeats 3 --json >"$f" 2>"$f.err"
    summary "$mode" "$f"
  done
done
echo "== 8B batch 1 ($((SECONDS - t0)) s; $(left) s left)"
if (($(left) > 200)); then
  python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" >/dev/null 2>&1
  for rep in 1 2; do
    for mode in 0 bulk; do
      (($(left) > 40)) || break
      f=$final/nh8b-$mode-$rep.jsonl
      MSTAR_L2_PREFETCH=$mode timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/nh8b" \
        --batch 1 --prompt-len 32 --new-tokens 64 --repeats 2 --json >"$f" 2>"$f.err"
      summary "$mode" "$f"
    done
  done
fi
rm -rf "$ck"
echo "== done ($((SECONDS - t0)) s)"
