# shellcheck shell=bash
# Sourced by session 43's call scripts (run from .carry/ on the device, this
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

# The switches of an A/B mode: C the conv fold, E the lookup fold, A the
# argmax fold, P the KV append fold (each removes kernels from the step), M
# the MLP's activation in its up GEMV's epilogue.
envs_of() {  # MODE
  local c=0 e=0 a=0 p=0 m=0
  case $1 in
    all) c=1 e=1 a=1 p=1 m=1 ;;
    folds) c=1 e=1 a=1 p=1 ;;
    noconv) e=1 a=1 p=1 ;;
    noembed) c=1 a=1 p=1 ;;
    noargmax) c=1 e=1 p=1 ;;
    noappend) c=1 e=1 a=1 ;;
    epilogue) m=1 ;;
    none) ;;
    *) echo "envs_of: no mode $1" >&2 ;;
  esac
  echo "MSTAR_CONV_FOLD=$c MSTAR_EMBED_FOLD=$e MSTAR_ARGMAX_FOLD=$a MSTAR_KV_APPEND_FOLD=$p" \
    "MSTAR_MLP_EPILOGUE=$m"
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
