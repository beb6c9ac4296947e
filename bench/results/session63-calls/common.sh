# shellcheck shell=bash
# Sourced by session 63's call scripts (run from .carry/ on the device, this file beside
# them): bench/device_calls.sh (copied beside this file) unpacks the binaries, sources
# bench/device_env.sh and defines `left`, `checkpoint`, `transformers_e2e`, `nh056_rounds`,
# `attn_rows_against_flashinfer` and `finish`.
source "$(dirname "${BASH_SOURCE[0]}")/device_calls.sh"
