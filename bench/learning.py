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

    python -m bench.learning --quick          # every mode, 1 seed, few steps: < 5 minutes on 2 CPU cores
    python -m bench.learning                  # every mode x 3 seeds: about 45 minutes on 2 CPU cores
    python -m bench.learning --task tools     # the tool-use testbed: none, gear, gigpo, gear+gigpo
    python -m bench.learning --report-only bench/results/learning/math.json   # rewrite its .md and .png

Training and scoring are `bench.harness.runs`' (`train_one`, `eval_start`), the job runner and cache
`bench.harness.jobs`'. Writes `bench/results/learning/<task>[_quick][_<tag>].{json,png,md}`.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import statistics
import time
from pathlib import Path

from bench.harness import REPO_ROOT, jobs, reports, results_dir, runs, stats

RESULTS_DIR = results_dir("learning")
SAMPLES = runs.SAMPLES  # sampled completions per held-out prompt

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


# One run, its cache key and its scores are the harness's (bench.harness.runs); the names stay here for the studies
# and tests that read them from this module.
final_window, recipe_values_sha, run_key, parse_arm = (
    runs.final_window,
    runs.recipe_values_sha,
    runs.run_key,
    runs.parse_arm,
)
job_spec, evaluate_model, held_out, train_one, eval_start = (
    runs.job_spec, runs.evaluate_model, runs.held_out, runs.train_one, runs.eval_start
)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# Summary, plot, table
# ---------------------------------------------------------------------------------------------------------------------


mean_std, window_mean = stats.mean_std, stats.window_mean


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
    parser.add_argument("--report-only", metavar="JSON", help="Rewrite the .md and .png beside a committed report "
                        "from its JSON (no training) and stop.")  # fmt: skip
    parser.add_argument("--no-png", action="store_true", help="With --report-only: the .md only.")
    return parser


def main(argv: list[str] | None = None, log=print) -> dict:
    args = make_parser().parse_args(argv)
    if args.report_only:
        return reports.rewrite_from_json(Path(args.report_only), plot, markdown_table, png=not args.no_png, log=log)
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
    name = args.task + ("_quick" if args.quick else "") + (f"_{args.tag}" if args.tag else "")
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
    job_list = [{"kind": "start", "key": "start", "model": recipe_values["model_name_or_path"], **common}]  # once
    for seed in seeds:  # seed-major: with --workers 2 a partial run still has every mode for the first seeds
        for label, mode, arm_overrides in arms:
            job_list.append({
                "kind": "train", "key": run_key(label, seed), "label": label, "mode": mode, "seed": seed,
                "recipe": recipe, "max_steps": max_steps, "overrides": overrides + arm_overrides, **common,
            })  # fmt: skip

    log(f"work dir {work_dir}")
    start = time.perf_counter()
    # strict: a worker that dies (out of memory, killed) stops the study; every run finished before it is cached
    results = jobs.run_jobs(job_list, args.workers, args.fresh, log, strict=True)
    results = {key: result for (_, key), result in results.items()}
    wall_s = time.perf_counter() - start

    trained = [results[job["key"]] for job in job_list if job["kind"] == "train"]
    window = args.window or final_window(max_steps)
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
        **reports.provenance(start),
        "wall_s_this_invocation": round(wall_s, 1),
        "start": results.get("start"),
        "summary": summarize(trained, [label for label, _, _ in arms], window),
        "runs": trained,
    }
    out_dir = Path(args.out_dir)
    reports.write_results(report, out_dir, name, plot, markdown_table, log)
    log(f"wrote {out_dir / (name + '.json')}, .png and .md ({wall_s / 60:.1f} min)")
    return report


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
