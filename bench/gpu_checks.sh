#!/bin/bash
# The checks that need a GPU, in one go: about 9 minutes on one H200, offline (random or shipped weights only).
#
#   bash bench/gpu_checks.sh [OUT_DIR]                 # default outputs/gpu_checks
#   bash bench/gpu_checks.sh [OUT_DIR] --device cpu    # step 6 alone at a tiny geometry (bench/tests/test_gpu_checks.py)
#
# 1. versions and the GPU;
# 2. GEAR trains 2 steps on the GPU from the horizon warm start (data/tiny-qwen3-horizon-independent, K = 4), once in
#    float32 and once in bf16 (`--bf16 true --dtype bfloat16`): its gear/ metrics, printed side by side, must be finite
#    and its weights must move (gear/weight_std > 0);
# 3. bench/bf16_credit.py --device cuda --rows 2: GEAR's credit in bf16 against float64 at Qwen3's vocabulary, where
#    the divergence takes its CUDA branches (float32 logits from the bf16 head in one matmul, one bmm for the row dot);
#    compare with the CPU figures in bench/results/bf16_credit/cpu.json;
# 4. bench/suffix_bias.py on Qwen3-4B's geometry (random weights) in bf16: does the memory-efficient SDPA kernel pad
#    (copy) the shared-prefix pass's suffix bias in every layer (docs/development.md)?
# 5. bench/overhead.py --device cuda --quick: GEAR's step against GRPO's and TRL SDPO's (top-k and full logits) at
#    Qwen3-4B's geometry (those four configurations: the other credit modes are the CPU study's);
# 6. bench/recipe_shape.py: the Qwen3-4B math and tool-use recipes as shipped (LoRA r = 64, bf16, gradient
#    checkpointing, the live teacher, the recipe's micro-batch and accumulation) on a random-weight Qwen3-4B, 2 steps
#    each under GRPO and GEAR through gear_trl.train, 256-token completions (a random model never stops); then the
#    GEAR math recipe with vLLM colocated at its own completion length when `vllm` imports (a line says it was skipped
#    when not). Step time, peak memory and the teacher pass's share per run. A recipe's GRPO and GEAR runs go back to
#    back and start only together, so a budget cut drops a whole pair, never half of one.
#
# Budget (measured on one H200 at ce4f9b3, bench/results/recipe_shape/): step 6 gets STEP6_S = 350 s, its model build
# (28 s) and four runs of 66-84 s, or what is left of TOTAL_S = 540 s if more. Steps 1-5 took 264 s there with eleven
# overhead configurations and four credit rows; with four and two they should take about 200 s (not yet measured on a
# GPU), and their own time limits keep a slow one from taking step 6's share.
#
# Each step has its own time limit and a failing step does not stop the next; the log ends with one summary table
# (each check's status and time, each recipe run's figures), also written as gpu_checks.json beside the log. Figures
# land in OUT_DIR: the log (gpu_checks.log), gpu_checks.json, steps.tsv, bf16_credit_cuda.json,
# cuda_quick.{json,md}, recipe_shape/recipe_shape.json and the training logs (train_logs.tgz). Logs, not
# weights: the trained models and the random 4B model are deleted once their checks are done.
device=cuda
out=
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    *) out=$1; shift ;;
  esac
done
out=${out:-outputs/gpu_checks}
mkdir -p "$out"
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
export PYTHONWARNINGS=ignore::FutureWarning,ignore::DeprecationWarning,ignore::UserWarning
py=${PYTHON:-python3}
cd "$(dirname "$0")/.." || exit 1

step() { echo; echo "== $* ($(date -u +%H:%M:%S))"; started=$SECONDS; }
# one line per check for the summary: name, exit status, seconds
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$((SECONDS - started))" >> "$out/steps.tsv"; }
# what a training run leaves besides its logs
drop_weights() {
  find "$1" -type f \( -name '*.safetensors' -o -name '*.bin' -o -name '*.pt' -o -name '*.pth' -o -name '*.gguf' \) -delete
}
TOTAL_S=${GPU_CHECKS_TOTAL_S:-540}
STEP6_S=${GPU_CHECKS_STEP6_S:-350}
: > "$out/steps.tsv"

{
if [ "$device" = cuda ]; then
step "1. versions"
nvidia-smi -L
$py -c "import torch, transformers, trl, peft; print('torch', torch.__version__, 'transformers', transformers.__version__,
'trl', trl.__version__, 'peft', peft.__version__, torch.cuda.get_device_name(0))"
record "1. versions" $?

step "2. GEAR on the GPU, 2 steps, float32 then bf16"
mkdir -p "$out/train"
for precision in fp32 bf16; do
  started=$SECONDS
  flags=(--bf16 false)
  [ "$precision" = bf16 ] && flags=(--bf16 true --dtype bfloat16)
  timeout 100 $py -m gear_trl.train --config recipes/tiny/config_horizon.yaml \
    --model_name_or_path data/tiny-qwen3-horizon-independent --dataset_name data/horizon/independent/k4 \
    --use_cpu false "${flags[@]}" --max_steps 2 --logging_steps 1 --save_strategy no \
    --output_dir "$out/train/$precision" > "$out/train/$precision.log" 2>&1
  rc=$?
  echo "$precision: rc=$rc"
  record "2. GEAR 2 steps, $precision" $rc
done
$py - "$out/train" <<'EOF'
import ast, math, re, sys
from pathlib import Path

keys = ["reward", "loss", "gear/kl_mean", "gear/kl_max", "gear/onset_rate", "gear/weight_std", "gear/weight_min",
        "gear/weight_max", "gear/teacher_prefix_shared_frac", "gear/failed_prefix_frac"]
logs = {}
for precision in ("fp32", "bf16"):
    path = Path(sys.argv[1]) / f"{precision}.log"
    text = path.read_text() if path.exists() else ""
    logs[precision] = [ast.literal_eval(m) for m in re.findall(r"\{'loss'.*?\}", text)]
print(f"{'metric':34s} " + "  ".join(f"{p} step {i + 1:<3d}" for p in logs for i in range(len(logs[p]))))
for key in keys:
    row = [str(step.get(key)) for p in logs for step in logs[p]]
    print(f"{key:34s} " + "  ".join(f"{v:>12s}" for v in row))
bad = [f"{p} step {i + 1}: {k}={s.get(k)}" for p in logs for i, s in enumerate(logs[p]) for k in keys
       if s.get(k) is not None and not math.isfinite(float(s[k]))]
still = [f"{p} step {i + 1}" for p in logs for i, s in enumerate(logs[p]) if float(s.get("gear/weight_std") or 0) == 0]
print("no steps logged" if not any(logs.values()) else f"non-finite: {bad or 'none'}; weights unmoved: {still or 'none'}")
EOF
drop_weights "$out/train"
tar -czf "$out/train_logs.tgz" -C "$out" train && rm -rf "$out/train"

step "3. credit in bf16 against float64, on the GPU"
timeout 60 $py bench/bf16_credit.py --device cuda --rows 2 --out "$out/bf16_credit_cuda.json" 2>&1 | grep -v -i warn
record "3. bf16 credit" "${PIPESTATUS[0]}"

step "4. the shared-prefix suffix bias under CUDA's SDPA kernels"
timeout 45 $py bench/suffix_bias.py --device cuda --model qwen3-4b-random --dtype bfloat16 --rows 8 --keys 1531 \
  2>&1 | grep -v -i warn
record "4. suffix bias" "${PIPESTATUS[0]}"

step "5. GEAR's step against GRPO's and SDPO's at Qwen3-4B's geometry (quick)"
timeout "${OVERHEAD_TIMEOUT:-60}" $py bench/overhead.py --device cuda --quick --out-dir "$out" \
  --configs grpo,gear/gear,sdpo/topk_logits,sdpo/full_logits 2>&1 | grep -v -i warn
record "5. overhead (quick)" "${PIPESTATUS[0]}"
else
  echo "steps 1-5 need CUDA: skipped (--device $device)"
fi

step "6. the Qwen3-4B recipes' shape, 2 steps each, GRPO and GEAR back to back per recipe"
budget=$((TOTAL_S - SECONDS))
[ "$budget" -lt "$STEP6_S" ] && budget=$STEP6_S  # its measured share, even when steps 1-5 ran long
[ "$device" = cpu ] && budget=300
timeout $((budget + 30)) $py bench/recipe_shape.py --device "$device" --out "$out/recipe_shape" --budget-s "$budget" \
  2>&1 | grep -v -i -e warn -e "it/s]" -e "^{'"
record "6. recipe shape" "${PIPESTATUS[0]}"
rm -rf "$out/recipe_shape"/model-*
drop_weights "$out/recipe_shape"

step "summary"
$py bench/recipe_shape.py --summary "$out" --total-s "$SECONDS"
echo "total: ${SECONDS} s"
} 2>&1 | tee "$out/gpu_checks.log"
