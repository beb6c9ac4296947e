#!/usr/bin/env bash
# Session 34's third call: per-kernel time shares (CUPTI, bench/h200_profile.sh) of main at b8fa1ef
# (the SSD walk merged): Nemotron-H ~0.6B decode at batch 64 and 1, and 8 x 2048 prefill; then the
# 0.56B prefill of 1 / 8 x 2048 with the SSD walk (MSTAR_SSD_VARIANT=1, default) and the old kernels
# chained (2), twice each, alternating.
# After scripts/pack-device.sh mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry .profile.
set -uo pipefail
cd "$(dirname "$0")/.."
(cd .carry && tar xJf bins.tar.xz)
bash bench/h200_profile.sh nemotron-decode nemotron-decode1 nemotron-prefill
source bench/device_env.sh
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" | tail -1 | cut -c1-80
for r in 1 2; do
  for v in 1 2; do
    MSTAR_SSD_VARIANT=$v timeout 60 "$bin/mstar-bench-model-gpu" --model "$ck/nh056" --batch 1 8 \
      --prompt-len 2048 --new-tokens 2 --repeats 3 --json | grep '^{' \
      | sed "s/^{/{\"ssd_variant\": $v, \"run\": $r, /" >>"$out/prefill-ssd.jsonl"
  done
done
python3 - "$out/prefill-ssd.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("ssd variant", r["ssd_variant"], "run", r["run"], "batch", r["batch"],
          "compute_fraction %.4f" % r["roofline_prefill"]["compute_fraction"])
PY
