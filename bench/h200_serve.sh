#!/usr/bin/env bash
# mstar-serve on an H200 (the device machine) under AIPerf, against the same
# engine in-process, results under $OUT (default ./h200-out):
#   1. AIPerf's wheels (carried in .whl/) go into /tmp/site, no network;
#   2. a random ~100M-parameter Nemotron-H (bench/transformers_decode.py
#      make-checkpoint --size 100m, vocabulary 32,000) given the embedded
#      model's BPE tokenizer.json (4,096 ids), so the server and AIPerf
#      tokenize alike (without one: the byte tokenizer the checkpoint
#      declares, which bench/serve_bench.py mirrors for AIPerf);
#   3. bench/serve_bench.py --device cuda: concurrency 1, 4, 16, 64, 128
#      (two interleaved rounds each, ISL 256 / OSL 256) and three Poisson
#      request rates over HTTP, each concurrency beside
#      mstar-bench-serve-baseline at the same concurrency; the table, JSON and
#      plot land in $OUT (serve-h200-cuda-*.{json,md,png}).
# Built and packed here first (binaries for sm_90 and the shared libraries
# the device lacks in .carry/, AIPerf's wheels in .whl/):
#   scripts/pack-device.sh mstar-serve mstar-bench-serve-baseline && bench/serve_wheels.sh
# then, with .carry and .whl carried: bash bench/h200_serve.sh [--quick]
# (--quick: concurrency 1 and 64, one rate, short outputs). For a dry run
# elsewhere: SERVE_DEVICE=cpu SERVE_MODEL=models/embedded/default.
set -euo pipefail
source "$(dirname "$0")/device_env.sh"
export PYTHONUNBUFFERED=1
sweep=(--concurrency 1 4 16 64 128 --isl 256 --osl 256 --rounds 2 --requests-per-client 4
  --rate-seconds 15)
if [[ -n ${SERVE_SWEEP:-} ]]; then read -r -a sweep <<<"$SERVE_SWEEP"; fi
if [[ ${1:-} == --quick ]]; then sweep=(--concurrency 1 64 --isl 128 --osl 64 --rate-seconds 5); fi
# One device command may run 10 minutes: the sweep gets what is left after
# the set-up, and saves its JSON after every run, so a cut leaves data.
budget=${SERVE_BUDGET_S:-450}

# At most 8 files come back from the device: env.txt, run.log, the three
# serve-* results, and serve-logs.tar.gz on failure.
exec > >(tee "$out/run.log") 2>&1
device=${SERVE_DEVICE:-cuda}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/env.txt" ||
  echo "no nvidia-smi" | tee "$out/env.txt"
nproc | sed 's/^/cpus /' | tee -a "$out/env.txt"

echo "== AIPerf from the carried wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$root"/.whl/*.whl
export PYTHONPATH=/tmp/site
python3 - <<'PY' | tee -a "$out/env.txt"
import importlib.metadata as m
print(" ".join(f"{p} {m.version(p)}" for p in
               ("aiperf", "transformers", "tokenizers", "numpy", "aiohttp", "matplotlib")))
PY

echo "== checkpoint"
if [[ -n ${SERVE_MODEL:-} ]]; then
  ckpt=$(mktemp -d)/model
  cp -r "$SERVE_MODEL" "$ckpt"
else
  ckpt=$(mktemp -d)/nemotron_h_100m
  python3 "$root/bench/transformers_decode.py" make-checkpoint --size 100m --out "$ckpt" |
    tee -a "$out/env.txt"
fi
if [[ -f $root/models/embedded/default/tokenizer.json && -z ${SERVE_MODEL:-} ]]; then
  python3 - "$root/models/embedded/default" "$ckpt" <<'PY' | tee -a "$out/env.txt"
import json, pathlib, shutil, sys
src, dst = map(pathlib.Path, sys.argv[1:])
vocab = json.loads((dst / "config.json").read_text())["vocab_size"]
tok = json.loads((src / "tokenizer.json").read_text())
ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
if max(ids) >= vocab:
    sys.exit(f"the embedded tokenizer has ids up to {max(ids)}, the checkpoint's vocab is {vocab}")
for f in src.iterdir():
    if f.name.startswith(("tokenizer", "special_tokens", "chat_template", "vocab.", "merges")):
        shutil.copy(f, dst / f.name)
cfg = json.loads((dst / "config.json").read_text())
cfg.pop("mstar_tokenizer", None)  # it wins over tokenizer.json (models/tokenizer.cpp)
(dst / "config.json").write_text(json.dumps(cfg, indent=2))
print(f"tokenizer: {src}/tokenizer.json ({max(ids) + 1} ids, checkpoint vocab {vocab})")
PY
else
  echo "tokenizer: the checkpoint's byte tokenizer (no models/embedded/default/tokenizer.json)" |
    tee -a "$out/env.txt"
fi

echo "== mstar-serve under AIPerf vs the engine in-process"
work=/tmp/serve-work
rc=0
timeout --signal=TERM --kill-after=20 "$budget" python3 "$root/bench/serve_bench.py" --model "$ckpt" --device "$device" --label h200 \
  --serve "$bin/mstar-serve" --baseline "$bin/mstar-bench-serve-baseline" \
  --aiperf /tmp/site/bin/aiperf --out-dir "$out" --work-dir "$work" "${sweep[@]}" || rc=$?
if ((rc != 0)); then
  tar czf "$out/serve-logs.tar.gz" -C "$work" --exclude='*.jsonl' --exclude='inputs.json' . || true
fi
exit "$rc"
