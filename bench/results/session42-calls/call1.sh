#!/usr/bin/env bash
# Session 42's first call: three folds into the batch-1 step's GEMVs: each recurrent layer's conv
# step into its in_proj (kernels::cuda::conv_step_fold, MSTAR_CONV_FOLD), the token's lookup into
# the first layer's (embedding_fold, MSTAR_EMBED_FOLD) and the MLP's activation into its up
# GEMV's epilogue (out_activation, MSTAR_MLP_EPILOGUE). Their kernel and model tests, the 0.56B
# at batch 1 / 4 with all, the first two, each alone and none (alternated), the step's timeline
# with all and with none (CUPTI, the carried .profile/libmstar_kernel_times.so;
# bench/profile/timeline.py), then the 8B at batch 1 and Qwen3.5 0.5B at batch 1 (both folds:
# its delta-net layers' conv too) and compute-sanitizer memcheck and racecheck over the folds'
# kernel tests while time is left. Everything under $OUT/call1.tgz. After PACK_XZ=1 scripts/pack-device.sh
# mstar_gpu_tests mstar-gpu-bench mstar-bench-model-gpu; carry .carry and .profile.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
(cd .carry && tar xJf bins.tar.xz)
source bench/device_env.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
final=$out
w=$(mktemp -d)
t0=$SECONDS
left() { echo $((540 - (SECONDS - t0))); }
echo "== GPU tests: linear, conv, the model's folds"
timeout 200 "$bin/mstar_gpu_tests" \
  --gtest_filter='gpu_linear.*:gpu_model_fused_norms.*:gpu_model_fused_qkv.*:gpu_model_chained.*:gpu_conv*:gpu_qwen3_5_fused_norms.*:gpu_math.*activat*' \
  >"$w/tests.log" 2>&1
echo "exit $? ($((SECONDS - t0)) s)"
grep -E "^\[==========\] [0-9]+ tests|^\[  PASSED  \] [0-9]+ tests|^\[  FAILED|^\[  SKIPPED \] [0-9]" "$w/tests.log"
ck=$(mktemp -d)
python3 bench/make_checkpoint.py --size nemotron_h-0.56b --out "$ck/nh056" >/dev/null 2>&1
echo "== 0.56B batch 1 / 4 ($((SECONDS - t0)) s)"
envs_of() {  # MODE: the switches it sets
  case $1 in
    all) echo "MSTAR_CONV_FOLD=1 MSTAR_EMBED_FOLD=1 MSTAR_MLP_EPILOGUE=1" ;;
    both) echo "MSTAR_CONV_FOLD=1 MSTAR_EMBED_FOLD=1 MSTAR_MLP_EPILOGUE=0" ;;
    noconv) echo "MSTAR_CONV_FOLD=0 MSTAR_EMBED_FOLD=1 MSTAR_MLP_EPILOGUE=0" ;;
    noembed) echo "MSTAR_CONV_FOLD=1 MSTAR_EMBED_FOLD=0 MSTAR_MLP_EPILOGUE=0" ;;
    epilogue) echo "MSTAR_CONV_FOLD=0 MSTAR_EMBED_FOLD=0 MSTAR_MLP_EPILOGUE=1" ;;
    none) echo "MSTAR_CONV_FOLD=0 MSTAR_EMBED_FOLD=0 MSTAR_MLP_EPILOGUE=0" ;;
  esac
}
ab_runs() {  # NAME "MODE..." "BENCH ARGS...": each mode twice, alternated, while time is left
  local name=$1 modes=$2 args=$3 rep mode f
  for rep in 1 2; do
    for mode in $modes; do
      (($(left) > 30)) || return 0
      f=$w/$name-$mode-$rep.jsonl
      # shellcheck disable=SC2046,SC2086  # the modes' switches and the args split on purpose
      env $(envs_of $mode) timeout "$(left)" "$bin/mstar-bench-model-gpu" --model "$ck/$name" \
        $args --prompt-len 32 --json >"$f" 2>"$f.err"
      model_summary "$mode" "$f"
    done
  done
}
ab_runs nh056 "all both noconv noembed epilogue none" "--batch 1 4 --new-tokens 128 --repeats 3"
echo "== timelines ($((SECONDS - t0)) s)"
cupti=$(cupti_lib_dir)
for mode in all none; do
  (($(left) > 120)) || break
  n=nh056-decode1-$mode
  # shellcheck disable=SC2046  # the mode's switches split on purpose
  env $(envs_of $mode) LD_LIBRARY_PATH=$cupti:$LD_LIBRARY_PATH \
    CUDA_INJECTION64_PATH=$root/.profile/libmstar_kernel_times.so MSTAR_KERNEL_PROFILE=$w/$n.txt \
    MSTAR_KERNEL_TIMELINE=$w/$n.timeline.jsonl timeout 90 "$bin/mstar-bench-model-gpu" \
    --model "$ck/nh056" --batch 1 --prompt-len 32 --new-tokens 256 --repeats 2 --json >"$w/$n.log" 2>&1
  echo "-- $n (exit $?)"
  python3 bench/profile/timeline.py "$w/$n.timeline.jsonl" --step-start loopback_kernel \
    >"$w/$n.steps.txt" 2>&1
  head -22 "$w/$n.steps.txt" | cut -c1-120
done
echo "== 8B batch 1 ($((SECONDS - t0)) s; $(left) s left)"
if (($(left) > 200)); then
  python3 bench/make_checkpoint.py --size nemotron_h-8b --out "$ck/nh8b" >/dev/null 2>&1
  ab_runs nh8b "all none" "--batch 1 --new-tokens 64 --repeats 2"
fi
echo "== Qwen3.5 0.5B batch 1 ($((SECONDS - t0)) s; $(left) s left)"
if (($(left) > 100)); then
  rm -rf "$ck/nh8b"
  python3 bench/transformers_decode.py make-checkpoint --size qwen3_5-0.5b --out "$ck/qwen" \
    >/dev/null 2>&1
  ab_runs qwen "both none" "--batch 1 --new-tokens 128 --repeats 3"
fi
echo "== compute-sanitizer ($((SECONDS - t0)) s; $(left) s left)"
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [[ -n $cs ]] && (($(left) > 150)); then
  for tool in memcheck racecheck; do
    timeout 70 "$cs" --tool $tool --error-exitcode 9 "$bin/mstar_gpu_tests" \
      --gtest_filter='gpu_linear.rms_norm_linear_with_*' >"$w/$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY' "$w/$tool.log" | tail -1))"
  done
fi
rm -rf "$ck"
rm -f "$w"/*.timeline.jsonl.gz
gzip -f "$w"/*.timeline.jsonl 2>/dev/null
tar czf "$final/call1.tgz" -C "$w" .
echo "== done ($((SECONDS - t0)) s)"
