"""The Qwen3-4B recipes' shape on one GPU: GRPO and GEAR, math and tool use, 2 optimizer steps each through
`gear_trl.train`, with random weights (offline).

    python -m bench.recipe_shape --device cuda --out outputs/gpu_checks/recipe_shape   # bench/gpu_checks.sh, step 6
    python -m bench.recipe_shape --device cpu --out /tmp/shape                         # tiny geometry (tests)

Each run is a shipped recipe, recipes/Qwen3-4B/{grpo,gear}/config_{math,tool_use}.yaml, as written (LoRA r = 64 on
every linear layer, bf16, gradient checkpointing, the live teacher, the recipe's micro-batch, group size and
accumulation) with what one GPU offline must change:

    model_name_or_path   a random-weight model of Qwen3-4B's config.json geometry (36 layers), written once to OUT/model;
                         the repository's tokenizer (its ids are a subset of the model's vocabulary)
    dataset_name         the local stand-ins of the Hub sets (data/math/math_style, data/xlam_sample), same adapters
    held_out_datasets    local sets (the recipes' Hub and GitHub benchmarks are unreachable offline)
    max_completion_length  `--completion-length` (default 256): a random model never stops, so every completion is
                         this long; the recipes' 2,048 / 1,024 tokens through transformers' generate would take minutes
                         a step. `--completion-length 0` keeps the recipe's.
    use_vllm             false for the four runs; when `vllm` imports, a fifth run trains the GEAR math recipe with
                         vLLM colocated as shipped (`vllm_mode: colocate`, its memory share), else a line says it was
                         skipped
    reward_funcs         the recipe's, plus the share of even token ids (a random model scores 0 on the shipped
                         rewards: no advantage, no update, no teacher weights)
    max_steps 2, no saving, no trackers, no Hub.

`--device cpu` runs the same four runs at a tiny geometry (2 layers, width 64, the tokenizer's vocabulary), 2
completions of 8 tokens a prompt, float32: what the tests run so that this script cannot rot.

Prints one row per run (step time of each step, peak memory, the teacher pass's share of the step) and writes them
to OUT/recipe_shape.json. `--budget-s` stops starting runs that would not finish in time (rows say so).

    python -m bench.recipe_shape --summary OUT_DIR   # gpu_checks.sh's closing table: OUT_DIR/steps.tsv + these runs
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

TOKENIZER = REPO_ROOT / "data" / "tiny-qwen3"
QWEN3_4B = {  # Qwen/Qwen3-4B's config.json
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151_936,
    "max_position_embeddings": 40960,
    "rope_theta": 1_000_000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}
TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 2264,  # the tokenizer's
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
}
STAND_INS = {  # task -> (dataset, held-out set), local
    "math": ("data/math/math_style", "data/math/gsm8k_style"),
    "tool_use": ("data/xlam_sample", "data/bfcl:single_turn"),
}
RUNS = [(task, method) for task in ("math", "tool_use") for method in ("grpo", "gear")]
SHAPE_REWARD = "shape_even_tokens"
RUN_S = {"cuda": 80.0, "cpu": 5.0}
"""What one recipe run takes, model load and two steps: 66-84 s on one H200 for the 4B recipes at 256-token
completions after the 28 s model build (bench/results/recipe_shape/h200.json, wall_seconds). A recipe's GRPO and GEAR
runs start together or not at all: a pair is not started with less than twice this left of `--budget-s`."""
BUILD_S = {"cuda": 28.0, "cpu": 2.0}
"""Writing the random-weight model once (28 s on the H200)."""
VLLM_RUN_S = 120.0


def even_token_share(completions, completion_ids, **kwargs) -> list[float]:
    """Share of even token ids in each completion: varies between random completions, so advantages are not 0."""
    return [sum(1 for token in ids if token % 2 == 0) / max(len(ids), 1) for ids in completion_ids]


def build_model(path: Path, geometry: dict) -> Path:
    """A random-weight Qwen3 of `geometry` in bf16 with the repository's tokenizer, written to `path` once."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    if (path / "config.json").exists():
        return path
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    config = Qwen3Config(
        **geometry,
        max_window_layers=geometry["num_hidden_layers"],
        attention_dropout=0.0,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() and geometry is QWEN3_4B else "cpu"
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(config, dtype=torch.bfloat16)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    partial = path.with_name(path.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(path)
    del model
    return path


def run_argv(task: str, method: str, model: Path, out: Path, device: str, completion_length: int, vllm: bool):
    """`gear_trl.train` arguments: the shipped recipe, then the overrides the module docstring lists."""
    import yaml

    recipe_path = REPO_ROOT / f"recipes/Qwen3-4B/{method}/config_{task}.yaml"
    recipe = yaml.safe_load(recipe_path.read_text())
    dataset, held_out = STAND_INS[task]
    argv = ["--config", str(recipe_path), "--model_name_or_path", str(model)]
    argv += ["--dataset_name", str(REPO_ROOT / dataset.partition(":")[0])]
    held_name, _, held_config = held_out.partition(":")
    argv += ["--held_out_datasets", str(REPO_ROOT / held_name) + (f":{held_config}" if held_config else "")]
    argv += ["--reward_funcs", *recipe["reward_funcs"], SHAPE_REWARD]
    argv += ["--output_dir", str(out), "--max_steps", "2", "--logging_steps", "1", "--save_strategy", "no"]
    argv += ["--report_to", "none", "--push_to_hub", "false", "--log_completions", "false", "--seed", "0"]
    argv += ["--use_vllm", "true" if vllm else "false"]
    if completion_length:
        argv += ["--max_completion_length", str(completion_length)]
    if device == "cpu":
        argv += ["--use_cpu", "true", "--bf16", "false", "--dtype", "float32"]
        argv += ["--per_device_train_batch_size", "2", "--num_generations", "2"]
    return argv


def run_one(task: str, method: str, argv: list[str], backend: str) -> dict:
    """Train one recipe in this process; its per-step `perf/` figures."""
    from gear_trl.rewards import REWARD_FUNCS
    from gear_trl.train import main, parse_args

    REWARD_FUNCS[SHAPE_REWARD] = even_token_share
    start = time.perf_counter()
    trainer = main(*parse_args(argv))
    wall = time.perf_counter() - start
    steps = [entry for entry in trainer.state.log_history if "perf/step_seconds" in entry]
    args = trainer.args
    row = {
        "task": task,
        "method": method,
        "backend": backend,
        "status": "ok" if trainer.state.global_step == 2 else f"stopped at step {trainer.state.global_step}",
        "step_seconds": [entry["perf/step_seconds"] for entry in steps],
        "peak_memory_gb": max((entry.get("perf/peak_memory_gb", 0.0) for entry in steps), default=None),
        "teacher_time_frac": [entry.get("perf/teacher_time_frac") for entry in steps],
        "completions_per_step": args.per_device_train_batch_size * args.gradient_accumulation_steps,
        "completion_length": args.max_completion_length,
        "lora_r": trainer.model.peft_config["default"].r if hasattr(trainer.model, "peft_config") else None,
        "gradient_checkpointing": args.gradient_checkpointing,
        "bf16": args.bf16,
        "teacher": args.teacher if args.credit != "none" else None,
        "wall_seconds": wall,
    }
    del trainer
    _release()
    return row


def _release() -> None:
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def summary(rows: list[dict]) -> str:
    """One line a run: what ran and its figures, for the check's summary table."""
    header = (
        f"{'task':9s} {'method':6s} {'backend':12s} {'status':24s} {'step 1 s':>9s} {'step 2 s':>9s} "
        f"{'peak GB':>8s} {'teacher share':>14s}"
    )
    lines = [header]
    for row in rows:
        steps = row.get("step_seconds") or []
        shares = [s for s in row.get("teacher_time_frac") or [] if s is not None]
        cells = [f"{s:9.2f}" for s in steps[:2]] + ["        -"] * (2 - len(steps[:2]))
        peak = row.get("peak_memory_gb")
        lines.append(
            f"{row['task']:9s} {row['method']:6s} {row['backend']:12s} {row['status'][:24]:24s} {' '.join(cells)} "
            f"{(f'{peak:8.2f}' if peak is not None else '       -')} "
            f"{(f'{sum(shares) / len(shares):14.2f}' if shares else '             -')}"
        )
    return "\n".join(lines)


VLLM_SKIPPED = "vLLM colocate: skipped (vllm does not import here; pip install -e '.[vllm]' to run it)"


def plan_runs(device: str, vllm_mode: str, has_vllm: bool) -> tuple[list[tuple[str, str, str, bool]], str | None]:
    """The runs, (task, method, backend, vllm), and the line saying why vLLM's run is left out (None when it runs or
    on CPU, where vLLM does not run)."""
    plan = [(task, method, "transformers", False) for task, method in RUNS]
    if device != "cuda" or vllm_mode == "off":
        return plan, None if device != "cuda" else "vLLM colocate: skipped (--vllm off)"
    if not has_vllm:
        return plan, VLLM_SKIPPED
    return [*plan, ("math", "gear", "vllm-colocate", True)], None


def checks_summary(out: Path) -> str:
    """The one table bench/gpu_checks.sh ends with: each check's status and seconds (`out/steps.tsv`, lines of name,
    exit status, seconds), each recipe run's figures under check 6 (`out/recipe_shape/recipe_shape.json`)."""
    steps_path, runs_path = out / "steps.tsv", out / "recipe_shape" / "recipe_shape.json"
    rows = [line.split("\t") for line in steps_path.read_text().splitlines() if line] if steps_path.exists() else []
    runs = json.loads(runs_path.read_text()) if runs_path.exists() else []
    lines = [f"{'check':40s} {'status':26s} {'seconds':>7s}  figures"]
    for name, rc, seconds in rows:
        lines.append(f"{name:40s} {'ok' if rc == '0' else f'exit {rc}':26s} {seconds:>7s}")
        if not name.startswith("6."):
            continue
        for run in runs:
            steps = run.get("step_seconds") or []
            shares = [s for s in run.get("teacher_time_frac") or [] if s is not None]
            figures = []
            if steps:
                figures.append("step " + " / ".join(f"{s:.2f}" for s in steps) + " s")
            if run.get("peak_memory_gb") is not None:
                figures.append(f"peak {run['peak_memory_gb']:.2f} GB")
            if shares:
                figures.append(f"teacher {sum(shares) / len(shares):.2f} of the step")
            if run.get("completion_length"):
                figures.append(f"{run['completions_per_step']} x {run['completion_length']} tokens a step")
            label = f"  {run['task']} {run['method']} ({run['backend']})"
            lines.append(
                f"{label:40s} {run['status'][:26]:26s} {'':>7s}  {', '.join(figures) or run.get('error', '')}"
            )
    return "\n".join(lines)


def write_checks_json(out: Path, total_s: float | None = None) -> Path:
    """gpu_checks.json beside the log: each check's name, exit status and seconds (`out/steps.tsv`), each recipe run's
    row (`out/recipe_shape/recipe_shape.json`), the recipes' GRPO/GEAR pairs with GEAR's last step over GRPO's, and
    the script's total seconds (`total_s`, or the checks' sum)."""
    steps_path, runs_path = out / "steps.tsv", out / "recipe_shape" / "recipe_shape.json"
    lines = [line.split("\t") for line in steps_path.read_text().splitlines() if line] if steps_path.exists() else []
    runs = json.loads(runs_path.read_text()) if runs_path.exists() else []
    steps = [
        {"check": name, "status": "ok" if rc == "0" else f"exit {rc}", "exit_code": int(rc), "seconds": int(seconds)}
        for name, rc, seconds in lines
    ]
    by_run = {(r["task"], r["method"], r["backend"]): r for r in runs}
    pairs = []
    for (task, method, backend), grpo in by_run.items():
        gear = by_run.get((task, "gear", backend))
        if method != "grpo" or gear is None:
            continue
        complete = grpo["status"] == "ok" and gear["status"] == "ok"
        ratio = gear["step_seconds"][-1] / grpo["step_seconds"][-1] if complete else None
        pairs.append({"task": task, "backend": backend, "complete": complete, "gear_over_grpo_last_step": ratio})
    summary_path = out / "gpu_checks.json"
    summary_path.write_text(
        json.dumps(
            {
                "steps": steps,
                "runs": runs,
                "pairs": pairs,
                "seconds": total_s if total_s is not None else sum(s["seconds"] for s in steps),
            },
            indent=1,
        )
        + "\n"
    )
    return summary_path


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", metavar="OUT_DIR", help="Print bench/gpu_checks.sh's summary table and stop.")
    parser.add_argument("--total-s", type=float, default=None, help="With --summary: the script's total seconds.")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--out", default="outputs/gpu_checks/recipe_shape")
    parser.add_argument("--completion-length", type=int, default=None, help="0: the recipe's (default 256; cpu: 8).")
    parser.add_argument("--budget-s", type=float, default=None, help="Start no run that would end after this.")
    parser.add_argument(
        "--vllm", choices=("auto", "off"), default="auto", help="auto: a colocated run if vllm imports"
    )
    args = parser.parse_args(argv)
    if args.summary:
        print(checks_summary(Path(args.summary)))
        path = write_checks_json(Path(args.summary), args.total_s)
        print(f"summary: {path}")
        return []
    start = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("--device cuda: no CUDA device is visible.")
    completion = (
        args.completion_length if args.completion_length is not None else (256 if args.device == "cuda" else 8)
    )
    geometry = QWEN3_4B if args.device == "cuda" else TINY
    model = build_model(out / ("model-qwen3-4b" if args.device == "cuda" else "model-tiny"), geometry)
    print(f"model: {model} ({geometry['num_hidden_layers']} layers, width {geometry['hidden_size']}, random weights)")

    def left() -> float:
        return float("inf") if args.budget_s is None else args.budget_s - (time.perf_counter() - start)

    plan, note = plan_runs(args.device, args.vllm, vllm_available())
    if note:
        print(note)

    def run(task: str, method: str, backend: str, vllm: bool) -> dict:
        base = {"task": task, "method": method, "backend": backend}
        argv = run_argv(task, method, model, out / f"{task}-{method}-{backend}", args.device, completion, vllm)
        if vllm:  # the recipe's completion length: vLLM generates it in seconds
            argv += ["--max_completion_length", str(_recipe_value(task, method, "max_completion_length"))]
        try:
            row = run_one(task, method, argv, backend)
        except Exception as err:  # noqa: BLE001 - one failing run is a row of the summary, not the end of the check
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            row = {**base, "status": f"failed: {type(err).__name__}", "error": first[:300]}
            print(f"{task} {method} {backend}: {type(err).__name__}: {first[:300]}", file=sys.stderr)
            _release()
        print(summary([row]).splitlines()[-1], flush=True)
        return row

    rows = schedule(plan, left, run, RUN_S[args.device])
    (out / "recipe_shape.json").write_text(json.dumps(rows, indent=2))
    print(summary(rows))
    return rows


def schedule(plan, left, run, run_s: float, vllm_s: float = VLLM_RUN_S) -> list[dict]:
    """Run `plan`'s entries, (task, method, backend, vllm), in order; a recipe's GRPO and GEAR runs (neighbours in the
    plan, same task and backend) as a pair that starts only with time left for both (`left()` seconds >= 2 x `run_s`),
    so that a budget cut drops whole pairs, never half of one; any other run needs `run_s` (`vllm_s` for vLLM's).
    `run(*entry)` returns a run's row; a run not started gets a row saying so."""
    rows, i = [], 0
    while i < len(plan):
        group = [plan[i]]
        if i + 1 < len(plan) and _pair(plan[i], plan[i + 1]):
            group.append(plan[i + 1])
        need = vllm_s if group[0][3] else run_s * len(group)
        if left() < need:
            what = "pair" if len(group) == 2 else "run"
            rows += [
                {
                    "task": t,
                    "method": m,
                    "backend": b,
                    "status": f"not run: budget ({left():.0f} s left, {what} needs {need:.0f} s)",
                }
                for t, m, b, _ in group
            ]
        else:
            rows += [run(*entry) for entry in group]
        i += len(group)
    return rows


def _pair(first, second) -> bool:
    return first[0] == second[0] and first[2:] == second[2:] and (first[1], second[1]) == ("grpo", "gear")


def _recipe_value(task: str, method: str, key: str):
    import yaml

    recipe = yaml.safe_load((REPO_ROOT / f"recipes/Qwen3-4B/{method}/config_{task}.yaml").read_text())
    return recipe[key]


if __name__ == "__main__":
    main()
