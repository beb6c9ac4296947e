# shellcheck shell=bash
# Sourced by session 45's call scripts (run from .carry/ on the device, this file beside
# them): the modes' switches (`envs_of`), then bench/device_calls.sh (copied beside this
# file), which unpacks the binaries, sources bench/device_env.sh and defines `left`,
# `ab_runs` and `finish`.
# The environment of a mode: the defaults, or one default turned off (side downloads,
# chained launches), or session 44's opt-in switches (call2's A/B).
envs_of() {  # MODE
  local s=1 k=0 e=0 r=0 n=0 p=1
  case $1 in
    defaults | nographs | sync) ;;
    noside) s=0 ;;
    nopdl) p=0 ;;
    plan2) k=2 ;;
    early) e=1 ;;
    resid) r=1 ;;
    all5) k=2 e=1 r=1 n=1 ;;
    *) echo "envs_of: no mode $1" >&2 ;;
  esac
  echo "MSTAR_SIDE_DOWNLOAD=$s MSTAR_PLAN_KERNEL=$k MSTAR_SSD_EARLY=$e MSTAR_GEMV_RESIDUAL_EARLY=$r" \
    "MSTAR_GEMV_NORM_PREFETCH=$n MSTAR_PDL=$p"
}

# The bench arguments a mode adds (the modes that change no switch).
args_of() {  # MODE
  case $1 in
    nographs) echo "--no-cuda-graphs" ;;
    sync) echo "--schedule sync" ;;
  esac
}

source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
