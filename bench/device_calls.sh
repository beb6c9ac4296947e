# shellcheck shell=bash
# Sourced by a session's device-call scripts (bench/results/sessionNN-calls/common.sh,
# run from .carry/ on the device machine) after they define `envs_of MODE` (the
# environment switches of an A/B mode): unpacks the carried binaries, sources
# bench/device_env.sh, and defines the call's clock (`left`), the alternated bench runs
# (`ab_runs`, `nh056_rounds`), the 0.56B's step timeline (`timeline_of`) and the packing
# of the results (`finish`). $w is the call's scratch
# folder, tarred into $OUT at the end; $ck holds the checkpoints the call makes.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
if [[ ! -d .carry/bin ]]; then (cd .carry && tar xJf bins.tar.xz); fi
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
w=$(mktemp -d)
ck=$(mktemp -d)
t0=$SECONDS
limit=${CALL_LIMIT:-540}
left() { echo $((limit - (SECONDS - t0))); }

# Each mode twice, alternated, while time is left: mstar-bench-model-gpu on
# checkpoint $ck/NAME, one summary line a run (model_summary).
ab_runs() {  # NAME "MODE..." "BENCH ARGS..."
  local name=$1 modes=$2 args=$3 rep mode f
  for rep in 1 2; do
    for mode in $modes; do
      (($(left) > 30)) || return 0
      f=$w/$name-$mode-$rep.jsonl
      # shellcheck disable=SC2046,SC2086  # the mode's switches and the args split on purpose
      env $(envs_of $mode) timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/$name" \
        $args --prompt-len 32 --json >"$f" 2>"$f.err"
      model_summary "$mode" "$f"
    done
  done
}

# The 0.56B's batch-1 step timeline under MODE (checkpoint $ck/nh056) (CUPTI through the carried
# .profile/libmstar_kernel_times.so), summarised by bench/profile/timeline.py, one
# step's launches listed.
timeline_of() {  # MODE
  local n=nh056-decode1-$1
  # shellcheck disable=SC2046  # the mode's switches split on purpose
  env $(envs_of "$1") "LD_LIBRARY_PATH=$(cupti_lib_dir):$LD_LIBRARY_PATH" \
    "CUDA_INJECTION64_PATH=$root/.profile/libmstar_kernel_times.so" "MSTAR_KERNEL_PROFILE=$w/$n.txt" \
    "MSTAR_KERNEL_TIMELINE=$w/$n.timeline.jsonl" timeout 90 "$bin/mstar-bench-model-gpu" \
    --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 256 --repeats 2 --json >"$w/$n.log" 2>&1
  echo "-- timeline $n (exit $?)"
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start loopback_kernel \
    >"$w/$n.steps.txt" 2>&1
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start loopback_kernel \
    --launches >"$w/$n.launches.txt" 2>&1
  head -16 "$w/$n.steps.txt" | cut -c1-120
}

# Rounds of the 0.56B at batch 1 (and BATCHES), MODES alternated, one summary line a run.
nh056_rounds() {  # ROUNDS "MODES" "BATCHES"
  local rep mode f
  for rep in $(seq 1 "$1"); do
    for mode in $2; do
      (($(left) > 25)) || return 0
      f=$w/nh056-$mode-$rep.jsonl
      # shellcheck disable=SC2046,SC2086  # the switches and batches split on purpose
      env $(envs_of $mode) timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/nh056" \
        --batch $3 --new-tokens 128 --repeats 3 --prompt-len 32 --json >"$f" 2>"$f.err"
      model_summary "$mode" "$f"
    done
  done
}

# Packs the call's results into $out/NAME.tgz.
finish() {  # NAME
  rm -rf "$ck"
  gzip -f "$w"/*.timeline.jsonl 2>/dev/null
  tar czf "$out/$1.tgz" -C "$w" .
  echo "== done ($((SECONDS - t0)) s)"
}
