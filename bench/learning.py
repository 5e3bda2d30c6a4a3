"""Does GEAR learn better than GRPO here, and which part of it matters? An RL testbed that runs on 2 CPU cores.

Every credit mode the trainer has is trained from the same warm start, with the same recipe, step budget, sample
budget and seeds; only `credit` differs:

    none              GRPO: the sequence advantage on every token
    token             GEAR weights with a segment per token (no segments)
    turn              one segment per assistant turn
    fixed             fixed-length segments (`fixed_segment_len`)
    gear_no_entropy   adaptive segments opened by the reverse-KL signal alone
    gear              adaptive segments, KL and entropy (the paper's method)
    rlsd              RLSD's reweighting: the sampled token's signed teacher/student log-ratio, no segments, no
                      rescaling (arXiv 2604.03128)

For each run the script records the training reward curve (TRL's logged `reward`, one point per step) and GEAR's
weight statistics, saves the final policy, and scores it on the held-out split with `gear_trl.evaluate` (greedy
accuracy, and sampled accuracy at the training temperature), as a user would. The starting checkpoint is scored the
same way once. Runs are independent processes, `--workers` at a time, one torch thread each; a finished run is
cached under `--work-dir` so an interrupted benchmark picks up where it stopped.

    python bench/learning.py --quick          # every mode, 1 seed, few steps: < 5 minutes on 2 CPU cores
    python bench/learning.py                  # every mode x 3 seeds: about 45 minutes on 2 CPU cores
    python bench/learning.py --task tools     # the tool-use testbed: none, gear, gigpo, gear+gigpo

Writes `bench/results/learning[_<task>][_quick].{json,png,md}`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO_ROOT / "bench" / "results"
SAMPLES = 2  # sampled completions per held-out prompt
if str(REPO_ROOT) not in sys.path:  # run as a script from a checkout; worker processes re-import this file
    sys.path.insert(0, str(REPO_ROOT))

# Per task: the recipe every run starts from, the modes compared, the held-out split, and the budgets.
TASKS = {
    "math": {
        "recipe": "recipes/tiny/config_arith.yaml",
        "modes": ["none", "token", "turn", "fixed", "gear_no_entropy", "gear", "rlsd"],
        "eval": {"dataset": "data/arith", "split": "test", "dataset_format": "generic", "max_new_tokens": 48},
        "full": {"seeds": [0, 1, 2], "max_steps": 100, "eval_limit": None},
        "quick": {"seeds": [0], "max_steps": 12, "eval_limit": 48},
    },
    # The multi-turn calculator task (data/calc_tools): tool calls executed in gear_trl.envs.Calculator, GiGPO anchor
    # states from its results; held-out rollouts run through TRL's tool loop (`gear_trl.evaluate --environment`).
    # The recipe's model, data/tiny-qwen3-calc, is made by `python data/scripts/make_warm_start.py --task calc_tools`.
    "tools": {
        "recipe": "recipes/tiny/config_calc_tools.yaml",
        "modes": ["none", "gear", "gigpo", "gear+gigpo"],
        "eval": {
            "dataset": "data/calc_tools",
            "split": "test",
            "dataset_format": "tool_use",
            "max_new_tokens": 256,
            "environment": "calculator",
            "max_tool_calling_iterations": 4,
        },
        "full": {"seeds": [0, 1, 2], "max_steps": 60, "eval_limit": None},
        "quick": {"seeds": [0], "max_steps": 8, "eval_limit": 32},
    },
}


# ---------------------------------------------------------------------------------------------------------------------
# One run (in its own process)
# ---------------------------------------------------------------------------------------------------------------------


def final_window(max_steps: int) -> int:
    """How many of a run's last steps its final-window figures average: the last quarter, at least one."""
    return max(1, max_steps // 4)


def recipe_values_sha(recipe: dict) -> str:
    """The cache key of a recipe's values (not its text: a reworded comment must not throw away cached runs)."""
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def run_key(label: str, seed: int) -> str:
    slug = "".join(c if c.isalnum() or c in "_-." else "_" for c in label.replace("+", "_plus_"))
    return f"{slug}__seed{seed}"


def parse_arm(text: str) -> tuple[str, str, list[str]]:
    """`MODE` or `MODE:KEY=VALUE,KEY=VALUE` -> (label, credit mode, recipe overrides as CLI arguments)."""
    mode, _, settings = text.partition(":")
    overrides = []
    for item in filter(None, settings.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(
                f"A variant's settings are KEY=VALUE pairs separated by commas; got {item!r} in {text!r}."
            )
        overrides += [f"--{key.strip()}", value.strip()]
    return (f"{mode} {settings}" if settings else mode), mode, overrides


def job_spec(job: dict) -> dict:
    """What a cached result must have been made with to be reused."""
    keys = (
        ("model", "eval_limit", "train_eval")
        if job["kind"] == "start"
        else ("recipe", "recipe_sha", "mode", "seed", "max_steps", "overrides", "eval_limit", "train_eval")
    )
    return {key: job[key] for key in keys}


def _log_series(log_history: list[dict], key: str) -> list[float | None]:
    return [entry.get(key) for entry in log_history if "reward" in entry]


def evaluate_model(model_dir: str, spec: dict, *, temperature: float, num_samples: int, limit, output: str) -> dict:
    """Score a saved model on the task's held-out split with `python -m gear_trl.evaluate`, in this process."""
    from gear_trl.evaluate import main as evaluate_main

    argv = [
        "--model", model_dir,
        "--dataset", spec["dataset"],
        "--split", spec["split"],
        "--dataset-format", spec["dataset_format"],
        "--max-new-tokens", str(spec["max_new_tokens"]),
        "--batch-size", "50",
        "--temperature", str(temperature),
        "--num-samples", str(num_samples),
        "--device", "cpu",
        "--seed", "0",
        "--output", output,
        "--no-progress",
    ]  # fmt: skip
    if limit:
        argv += ["--limit", str(limit)]
    if spec.get("reward"):  # a task scored by a reward other than the dataset format's own
        argv += ["--reward", spec["reward"]]
    if spec.get("environment"):  # multi-turn tool rollouts, tools executed
        argv += ["--environment", spec["environment"]]
        argv += ["--max-tool-calling-iterations", str(spec["max_tool_calling_iterations"])]
    report = evaluate_main(argv)
    return {key: report.get(key) for key in ("n", "num_samples", "accuracy", "mean_reward", "pass_at_k")}


def held_out(model_dir: str, job: dict, out_dir: Path) -> dict:
    """Greedy accuracy and the accuracy of `SAMPLES` samples per prompt at the training temperature on the held-out
    split; with `train_eval`, greedy accuracy on the problems trained on as well."""
    spec, limit = job["eval"], job["eval_limit"]
    greedy = evaluate_model(
        model_dir, spec, temperature=0.0, num_samples=1, limit=limit, output=str(out_dir / "greedy.json")
    )
    sampled = evaluate_model(
        model_dir,
        spec,
        temperature=job["temperature"],
        num_samples=SAMPLES,
        limit=limit,
        output=str(out_dir / "sampled.json"),
    )
    scores = {
        "n": greedy["n"],
        "greedy_accuracy": greedy["accuracy"],
        "sampled_accuracy": sampled["accuracy"],
        "pass_at_k": sampled["pass_at_k"],
    }
    if job.get("train_eval"):
        train_spec = {**spec, "split": job["train_eval"]["split"]}
        trained = evaluate_model(
            model_dir,
            train_spec,
            temperature=0.0,
            num_samples=1,
            limit=job["train_eval"]["limit"],
            output=str(out_dir / "train_greedy.json"),
        )
        scores.update(train_n=trained["n"], train_greedy_accuracy=trained["accuracy"])
    return scores


def train_one(job: dict) -> dict:
    """Train one (mode, seed) from the recipe, save the policy, score it on the held-out split."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(1)
    os.chdir(REPO_ROOT)
    from transformers.utils import logging as hf_logging

    from gear_trl.train import build_trainer, load_splits, parse_args

    hf_logging.set_verbosity_error()
    run_dir = Path(job["work_dir"]) / job["key"]
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        "--config", job["recipe"],
        "--credit", job["mode"],
        "--seed", str(job["seed"]),
        "--max_steps", str(job["max_steps"]),
        "--output_dir", str(run_dir / "train"),
        "--save_strategy", "no",
        "--report_to", "none",
        "--logging_steps", "1",
        "--push_to_hub", "false",
        "--disable_tqdm", "true",
        *job["overrides"],
    ]  # fmt: skip
    script_args, training_args, model_args = parse_args(argv)
    train_dataset, _ = load_splits(script_args, training_args)
    start = time.perf_counter()
    trainer = build_trainer(script_args, training_args, model_args, train_dataset)
    trainer.train()
    train_s = time.perf_counter() - start
    model_dir = str(run_dir / "model")
    trainer.save_model(model_dir)
    history = trainer.state.log_history
    result = {
        "label": job.get("label", job["mode"]),
        "mode": job["mode"],
        "seed": job["seed"],
        "spec": job_spec(job),
        "steps": trainer.state.global_step,
        "train_s": round(train_s, 1),
        "reward": _log_series(history, "reward"),
        "reward_std": _log_series(history, "reward_std"),
        "frac_reward_zero_std": _log_series(history, "frac_reward_zero_std"),
        "weight_std": _log_series(history, "gear/weight_std"),
        "onset_rate": _log_series(history, "gear/onset_rate"),
        "segment_len_mean": _log_series(history, "gear/segment_len_mean"),
        "kl_mean": _log_series(history, "gear/kl_mean"),
        # the label-free diagnostics (bench/teacher_sweep.py compares them with label-based localization)
        "kl_failed_over_passed": _log_series(history, "gear/kl_failed_over_passed"),
        "onsets_in_failed_frac": _log_series(history, "gear/onsets_in_failed_frac"),
        "kl_floor": _log_series(history, "gear/kl_floor"),
        "onsets_teacher_supported_frac": _log_series(history, "gear/onsets_teacher_supported_frac"),
        "gigpo_step_adv_std": _log_series(history, "gigpo/step_adv_std"),
        "distill_share": _log_series(history, "gear/distill_share"),  # with distillation_weight; else None
        "completion_length": _log_series(history, "completions/mean_length"),
    }
    del trainer
    start = time.perf_counter()
    result["eval"] = held_out(model_dir, job, run_dir)
    result["eval_s"] = round(time.perf_counter() - start, 1)
    (run_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result


def eval_start(job: dict) -> dict:
    """Score the starting checkpoint (step 0) on the held-out split."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)
    os.chdir(REPO_ROOT)
    out_dir = Path(job["work_dir"]) / "start"
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {
        "model": job["model"],
        "spec": job_spec(job),
        "eval": held_out(job["model"], job, out_dir),
    }
    (out_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result


def _dispatch(job: dict) -> dict:
    return eval_start(job) if job["kind"] == "start" else train_one(job)


# ---------------------------------------------------------------------------------------------------------------------
# Summary, plot, table
# ---------------------------------------------------------------------------------------------------------------------


def mean_std(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def window_mean(values: list, start: int, stop: int | None = None) -> float:
    part = [v for v in values[start:stop] if v is not None]
    return statistics.fmean(part) if part else math.nan


def summarize(runs: list[dict], modes: list[str], window: int) -> dict:
    """Per mode over seeds: reward in the first and last `window` steps, held-out accuracies, GEAR weight spread."""
    summary = {}
    for mode in modes:
        mine = [r for r in runs if r.get("label", r["mode"]) == mode]
        if not mine:
            continue
        row = {"seeds": [r["seed"] for r in mine]}
        first = [window_mean(r["reward"], 0, window) for r in mine]
        last = [window_mean(r["reward"], -window) for r in mine]
        for name, values in (
            ("reward_first", first),
            ("reward_last", last),
            ("reward_gain", [b - a for a, b in zip(first, last)]),
            ("greedy_accuracy", [(r["eval"] or {}).get("greedy_accuracy") for r in mine]),
            ("sampled_accuracy", [(r["eval"] or {}).get("sampled_accuracy") for r in mine]),
            ("pass_at_k", [(r["eval"] or {}).get("pass_at_k") for r in mine]),
            ("train_greedy_accuracy", [(r["eval"] or {}).get("train_greedy_accuracy") for r in mine]),
            ("weight_std", [window_mean(r["weight_std"], 0) for r in mine]),
            ("gigpo_step_adv_std", [window_mean(r.get("gigpo_step_adv_std") or [], 0) for r in mine]),
            ("train_s", [r["train_s"] for r in mine]),
        ):
            mean, std = mean_std(values)
            row[name] = {"mean": mean, "std": std, "values": values}
        summary[mode] = row
    return summary


def smooth(values: list, width: int) -> list[float]:
    clean = [math.nan if v is None else v for v in values]
    out = []
    for i in range(len(clean)):
        part = [v for v in clean[max(0, i - width + 1) : i + 1] if not math.isnan(v)]
        out.append(statistics.fmean(part) if part else math.nan)
    return out


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    modes = [m for m in report["modes"] if m in report["summary"]]
    colors = plt.get_cmap("tab10")
    fig, (ax_curve, ax_acc) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [1.6, 1]})
    width = report["config"]["smooth"]
    rewards = {mode: [r["reward"] for r in report["runs"] if r.get("label", r["mode"]) == mode] for mode in modes}
    for i, mode in enumerate(modes):
        curves = [smooth(reward, width) for reward in rewards[mode]]
        twin = next((other for other in modes[:i] if rewards[other] == rewards[mode]), None)
        label = f"{mode} (same runs as {twin})" if twin else mode
        length = min(len(c) for c in curves)
        data = np.array([c[:length] for c in curves])
        mean, std = np.nanmean(data, axis=0), np.nanstd(data, axis=0)
        steps = np.arange(1, length + 1)
        ax_curve.plot(steps, mean, color=colors(i), label=label, lw=1.6, ls="--" if twin else "-")
        ax_curve.fill_between(steps, mean - std, mean + std, color=colors(i), alpha=0.12)
    ax_curve.set_xlabel("step")
    ax_curve.set_ylabel(f"training reward (moving mean over {width} steps)")
    ax_curve.set_title("Reward: mean and spread (1 sd) over seeds")
    ax_curve.legend(fontsize=8)
    ax_curve.grid(alpha=0.3)

    start = report["start"]["eval"]
    metrics = [("greedy_accuracy", "held-out greedy", 0.9), ("sampled_accuracy", "held-out sampled", 0.5)]
    if start.get("train_greedy_accuracy") is not None:
        metrics.append(("train_greedy_accuracy", "trained-on greedy", 0.25))
    styles = ["--", ":", "-."]
    bar = 0.8 / len(metrics)
    for j, (metric, label, alpha) in enumerate(metrics):
        offset = (j - (len(metrics) - 1) / 2) * bar
        for i, mode in enumerate(modes):
            values = [v for v in report["summary"][mode][metric]["values"] if v is not None]
            ax_acc.bar(i + offset, statistics.fmean(values), width=bar * 0.95, color=colors(i), alpha=alpha)
            ax_acc.scatter([i + offset] * len(values), values, color="black", s=8, zorder=3)
        ax_acc.axhline(start[metric], color="gray", ls=styles[j], lw=1, label=f"start, {label}")
    ax_acc.set_xticks(range(len(modes)), modes, rotation=30, ha="right", fontsize=8)
    ax_acc.set_ylabel("accuracy (dots: seeds)")
    ax_acc.set_title(
        f"Accuracy after {report['config']['max_steps']} steps\nbars, left to right: "
        + ", ".join(label for _, label, _ in metrics),
        fontsize=9,
    )
    ax_acc.legend(fontsize=8)
    ax_acc.grid(alpha=0.3, axis="y")
    fig.suptitle(report["title"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(cell: dict, digits: int = 3) -> str:
    if cell is None or math.isnan(cell["mean"]):
        return "n/a"
    if len(cell["values"]) > 1:
        return f"{cell['mean']:.{digits}f} ± {cell['std']:.{digits}f}"
    return f"{cell['mean']:.{digits}f}"


def _num(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def markdown_table(report: dict) -> str:
    """The README table: one row per mode, mean ± sd over seeds. The last columns are the task's: accuracy on the
    problems trained on and GEAR's weight spread (math); GEAR's weight spread and GiGPO's step-advantage spread
    (tools, where every problem is trained on about once)."""
    window = report["config"]["window"]
    start = report["start"]["eval"] if report["start"] is not None else None
    tools = report.get("task") == "tools"
    extra = ("weight std", "GiGPO step-adv. std") if tools else ("trained-on problems, greedy acc.", "weight std")
    lines = [
        (
            f"| credit | reward, first {window} steps | reward, last {window} steps | held-out greedy acc. "
            f"| held-out sampled acc. | {extra[0]} | {extra[1]} |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    if start is not None:
        start_extra = "" if tools else _num(start.get("train_greedy_accuracy"))
        lines.append(
            f"| (start) | | | {start['greedy_accuracy']:.3f} | {start['sampled_accuracy']:.3f} | {start_extra} | |"
        )
    for mode, row in report["summary"].items():
        last = ("weight_std", "gigpo_step_adv_std") if tools else ("train_greedy_accuracy", "weight_std")
        lines.append(
            f"| `{mode}` | {_fmt(row['reward_first'])} | {_fmt(row['reward_last'])} | {_fmt(row['greedy_accuracy'])} "
            f"| {_fmt(row['sampled_accuracy'])} | {_fmt(row[last[0]])} | {_fmt(row[last[1]])} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------------


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), default="math")
    parser.add_argument("--quick", action="store_true", help="One seed, few steps, a slice of the held-out split.")
    parser.add_argument(
        "--modes", nargs="*", help="Credit modes (default: every mode of the task; none given: --variants only)."
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        default=[],
        metavar="MODE:KEY=VALUE,...",
        help="Extra arms: a mode with its own settings, e.g. 'gear:weight_alpha=3,weight_eps=0.9'.",
    )
    parser.add_argument("--tag", help="Suffix of the output files (runs are still cached per task).")
    parser.add_argument("--seeds", nargs="+", type=int, help="Seeds (default: 0 1 2; --quick: 0).")
    parser.add_argument("--max-steps", type=int, help="Optimizer steps per run (the same for every run).")
    parser.add_argument("--eval-limit", type=int, help="Score only the first N held-out rows.")
    parser.add_argument("--recipe", help="Recipe every run starts from (default: the task's).")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="Recipe overrides for every run.")
    parser.add_argument("--workers", type=int, default=2, help="Runs in parallel (one torch thread each).")
    parser.add_argument("--work-dir", help="Where runs and their cache go (default: outputs/learning/<name>).")
    parser.add_argument("--out-dir", default=str(RESULTS_DIR))
    parser.add_argument("--smooth", type=int, default=10, help="Moving-mean width of the plotted reward curves.")
    parser.add_argument("--window", type=int, help="Steps averaged for the first/last reward (default: a quarter).")
    parser.add_argument("--fresh", action="store_true", help="Ignore cached runs in --work-dir.")
    return parser


def main(argv: list[str] | None = None, log=print) -> dict:
    args = make_parser().parse_args(argv)
    task = TASKS[args.task]
    budget = task["quick" if args.quick else "full"]
    modes = args.modes if args.modes is not None else task["modes"]
    seeds = args.seeds if args.seeds is not None else budget["seeds"]
    max_steps = args.max_steps or budget["max_steps"]
    eval_limit = args.eval_limit if args.eval_limit is not None else budget["eval_limit"]
    recipe = args.recipe or task["recipe"]
    overrides = []
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set takes KEY=VALUE; got {item!r}.")
        overrides += [f"--{key}", value]
    arms = [parse_arm(mode) for mode in modes] + [parse_arm(text) for text in args.variants]
    base = "learning" + ("" if args.task == "math" else f"_{args.task}") + ("_quick" if args.quick else "")
    name = base + (f"_{args.tag}" if args.tag else "")
    work_dir = Path(args.work_dir or REPO_ROOT / "outputs" / "learning" / base)
    work_dir.mkdir(parents=True, exist_ok=True)

    import yaml

    recipe_text = (REPO_ROOT / recipe).read_text()
    recipe_values = yaml.safe_load(recipe_text)
    temperature = float(recipe_values.get("temperature", 1.0))
    # With `max_train_samples` the runs train on the first N problems of the train split: score those too.
    train_eval = None
    if recipe_values.get("max_train_samples"):
        limit = recipe_values["max_train_samples"]
        train_eval = {
            "split": recipe_values.get("dataset_train_split", "train"),
            "limit": min(limit, eval_limit or limit),
        }
    common = {
        "work_dir": str(work_dir),
        "eval": task["eval"],
        "eval_limit": eval_limit,
        "train_eval": train_eval,
        "temperature": temperature,
        "recipe_sha": hashlib.sha256(recipe_text.encode()).hexdigest()[:12],
    }
    jobs = [{"kind": "start", "key": "start", "model": recipe_values["model_name_or_path"], **common}]  # scored once
    for seed in seeds:  # seed-major: with --workers 2 a partial run still has every mode for the first seeds
        for label, mode, arm_overrides in arms:
            jobs.append({
                "kind": "train", "key": run_key(label, seed), "label": label, "mode": mode, "seed": seed,
                "recipe": recipe, "max_steps": max_steps, "overrides": overrides + arm_overrides, **common,
            })  # fmt: skip

    results, todo = {}, []
    for job in jobs:
        cached = work_dir / job["key"] / "result.json"
        result = json.loads(cached.read_text()) if cached.exists() and not args.fresh else None
        if result is not None and result.get("spec") == job_spec(job):
            results[job["key"]] = result
        else:
            todo.append(job)
    log(f"{len(jobs)} jobs ({len(jobs) - len(todo)} cached), {args.workers} at a time, work dir {work_dir}")
    start = time.perf_counter()
    if todo:
        # A worker that dies (out of memory, killed) breaks the pool: the error surfaces here, and every run
        # finished before it is already cached in the work dir.
        context = mp.get_context("spawn")
        with ProcessPoolExecutor(args.workers, mp_context=context, max_tasks_per_child=1) as pool:
            futures = {pool.submit(_dispatch, job): job["key"] for job in todo}
            for done, future in enumerate(as_completed(futures), 1):
                key = futures[future]
                results[key] = future.result()
                elapsed = time.perf_counter() - start
                eta = elapsed / done * (len(todo) - done)
                scores = results[key].get("eval") or {}
                log(
                    f"[{done}/{len(todo)}] {key}: held-out greedy {scores.get('greedy_accuracy')}, sampled "
                    f"{scores.get('sampled_accuracy')} ({elapsed / 60:.1f} min, ~{eta / 60:.1f} min left)"
                )
    wall_s = time.perf_counter() - start

    runs = [results[job["key"]] for job in jobs if job["kind"] == "train"]
    window = args.window or final_window(max_steps)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    report = {
        "title": f"gear_trl learning testbed ({args.task}{', quick' if args.quick else ''}): "
        f"{recipe}, {max_steps} steps, seeds {seeds}",
        "task": args.task,
        "modes": [label for label, _, _ in arms],
        "config": {
            "recipe": recipe,
            "overrides": args.set,
            "max_steps": max_steps,
            "seeds": seeds,
            "eval": task["eval"],
            "eval_limit": eval_limit,
            "window": window,
            "smooth": args.smooth,
            "workers": args.workers,
        },
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "git": commit.stdout.strip() or None,
        "wall_s_this_invocation": round(wall_s, 1),
        "start": results.get("start"),
        "summary": summarize(runs, [label for label, _, _ in arms], window),
        "runs": runs,
    }
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=1))
    plot(report, out_dir / f"{name}.png")
    table = markdown_table(report)
    (out_dir / f"{name}.md").write_text(f"# {report['title']}\n\n{table}\n")
    log(table)
    log(f"wrote {out_dir / (name + '.json')}, .png and .md ({wall_s / 60:.1f} min)")
    return report


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
