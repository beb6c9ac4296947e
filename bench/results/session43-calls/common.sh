# shellcheck shell=bash
# Sourced by session 43's call scripts (run from .carry/ on the device, this file beside
# them): the A/B modes' switches (`envs_of`), then bench/device_calls.sh (copied beside this
# file), which unpacks the binaries, sources bench/device_env.sh and defines `left`,
# `ab_runs` and `finish`.
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

source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
