# shellcheck shell=bash
# Sourced by session 44's call scripts (run from .carry/ on the device, this
# file beside them): unpacks the binaries, sources bench/device_env.sh, and
# defines the call's clock (`left`), the A/B switch sets (`envs_of`) and the
# alternated bench runs (`ab_runs`). $w is the call's scratch folder, tarred
# into $OUT at the end by `finish`.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
if [[ ! -d .carry/bin ]]; then (cd .carry && tar xJf bins.tar.xz); fi
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
w=$(mktemp -d)
ck=$(mktemp -d)
t0=$SECONDS
limit=${CALL_LIMIT:-540}
left() { echo $((limit - (SECONDS - t0))); }

# The switches of an A/B mode (session 44's five opt-in changes around the
# step's boundaries; every mode keeps the model's defaults otherwise): S side
# downloads, K the plan kernel, E the SSD update's early state reads, R the
# accumulating GEMVs' early residual loads, N the norm forms' L2 prefetch of
# their norm weight.
envs_of() {  # MODE
  local s=0 k=0 e=0 r=0 n=0
  case $1 in
    defaults) ;;
    side) s=1 ;;
    plan) k=1 ;;
    early) e=1 ;;
    resid) r=1 ;;
    normpf) n=1 ;;
    sideplan) s=1 k=1 ;;
    all5) s=1 k=1 e=1 r=1 n=1 ;;
    *) echo "envs_of: no mode $1" >&2 ;;
  esac
  echo "MSTAR_SIDE_DOWNLOAD=$s MSTAR_PLAN_KERNEL=$k MSTAR_SSD_EARLY=$e MSTAR_GEMV_RESIDUAL_EARLY=$r" \
    "MSTAR_GEMV_NORM_PREFETCH=$n"
}

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

# Packs the call's results into $out/NAME.tgz.
finish() {  # NAME
  rm -rf "$ck"
  gzip -f "$w"/*.timeline.jsonl 2>/dev/null
  tar czf "$out/$1.tgz" -C "$w" .
  echo "== done ($((SECONDS - t0)) s)"
}
