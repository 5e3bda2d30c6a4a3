#!/usr/bin/env bash
# One GRPO or GEAR step on SmolLM2-135M-Instruct (make smollm2) through gear_trl.train on CPU, for BUDGET.md: each
# setting runs 3 optimizer steps of the horizon recipe (independent variant, K = 4) and prints its per-step
# perf/step_seconds, the process's CPU seconds over its wall seconds (on a shared machine a step's wall time times
# that share estimates its CPU time) and its peak RSS. One torch thread a run (the study would run one run a core).
# Usage, from the repository root:
#   bash bench/results/pretrained/measure_steps.sh NAME "EXTRA ARGS" [NAME "EXTRA ARGS" ...]
#   bash bench/results/pretrained/measure_steps.sh gear_full "--credit gear --learning_rate 1e-6"
set -euo pipefail
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1
export PYTHONWARNINGS=ignore::FutureWarning,ignore::DeprecationWarning PYTHONPATH="$PWD"
PYTHON=${PYTHON:-python}
OUT=${OUT:-outputs/pretrained_steps}
mkdir -p "$OUT"
while [ $# -ge 2 ]; do
  name=$1; extra=$2; shift 2
  start=$(date +%s)
  # shellcheck disable=SC2086
  /usr/bin/time -f "%U %S %e %M" -o "$OUT/$name.time" "$PYTHON" -m gear_trl.train --config recipes/tiny/config_horizon.yaml --model_name_or_path data/smollm2-135m-instruct \
    --dataset_name data/horizon/independent/k4 --max_completion_length 64 --max_steps 3 --logging_steps 1 \
    --disable_tqdm true --output_dir "$OUT/$name" $extra > "$OUT/$name.log" 2>&1 || echo "$name: exited $? (killed for memory?)"
  steps=$(grep -o "'perf/step_seconds': '[0-9.]*'" "$OUT/$name.log" | grep -o "[0-9.]*" | tr '\n' ' ')
  lengths=$(grep -o "'completions/mean_length': '[0-9.]*'" "$OUT/$name.log" | grep -o "[0-9.]*" | tr '\n' ' ')
  read -r user sys wall rss < <(tail -1 "$OUT/$name.time")
  share=$(python3 -c "print(f'{($user + $sys) / $wall:.2f}')")
  echo "$name: step seconds $steps| mean lengths $lengths| CPU/wall $share | peak RSS $(( rss / 1024 )) MB | process $wall s | load $(cut -d' ' -f1-3 /proc/loadavg) | $extra"
done
