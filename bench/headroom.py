"""Where can GEAR pay? Each credit arm against GRPO (`none`), paired by seed, per task, with an oracle ceiling.

On every testbed so far GEAR ties GRPO (README, "When does GEAR help?"). This study separates the two reasons it
could: a teacher that does not find the errors, and a weighting too mild to matter once it does. Per task it trains
every arm from the same warm start, recipe, steps, batch and seeds, and reports, per arm:

- the final-window training reward and held-out sampled accuracy (2 samples at T = 1), each as the paired difference
  from `none` with its 95% t-interval over seeds (and the arm's own mean and interval);
- localization, on rollouts of held-out problems sampled as training samples them (`gear_trl.inspect_credit.sample_credit`)
  and scored against labels (bench/credit_sites.py's first wrong token): onset at the error token, the error token's
  blame ratio, the share of advantage mass moved (bench/teacher_sweep.py's `localization`), with their chance levels;
- the label-free diagnostics the trainer logs, during training: `gear/kl_failed_over_passed`, `gear/kl_floor`,
  `gear/onsets_teacher_supported_frac` (the share of onsets in passed rollouts on tokens the teacher supports). In the
  oracle arms the "KL" is the label signal, 0 in every passed rollout, so these are undefined there.

What the teacher sees. A teacher shown only the final answer (the paper's arithmetic setting, and every earlier study
here) cannot know which intermediate line of a failed solution went wrong; one shown the worked solution can. On arith
the warm start (`data/tiny-qwen3-arith-sol35`, data/README.md) was trained to use either in its teacher prompt, and
the task's teacher sees the solution (`teacher_reference: solution`, the rows' `reference_solution`): `gear-signed`
and `rlsd` use it. `gear-answer` and `gear-solution` are GEAR with each teacher, so their difference is what the
solution buys.

The oracle arms (bench code only, never in the library) replace the teacher's KL by a signal built from labels: 1 from
the first wrong token of a failed rollout on, 0 before it and 0 in every other rollout, passed through the same
segment and weight functions (a credit mode registered by `bench.harness.oracles` in the worker process). `oracle-gear` uses GEAR's defaults, `oracle-token` marks only the first
wrong token (`credit: token`, no segments), `oracle-strong` is the strongest weighting we can justify (see
`ORACLE_STRONG`). What the oracle arms gain over `none` bounds what GEAR's weighting can do with a perfect teacher.

Runs use the harness (`bench.harness`: training and scoring, the job runner and cache, the statistics) and
bench/teacher_sweep.py's `localization`; each task's runs are cached under `--work-dir` keyed on the warm start's
weights, so an interrupted study picks up where it stopped.

    python -m bench.headroom --quick     # arith: 5 arms x 2 seeds, 3 steps; calc_long: none, oracle-gear x 1 seed, 2 steps
    python -m bench.headroom --tasks arith       # 8 arms x 8 seeds: about 1.5 CPU-hours (see BUDGETS)
    python -m bench.headroom --tasks calc_long   # 7 arms x 8 seeds, 20 steps: about 6 CPU-hours (see BUDGETS)
    python -m bench.headroom --report-only       # rewrite the committed .md and .png from the committed JSON

`calc_long` (chains of 4-6 tool calls, data/README.md "Long chains") is the paper's regime: long rollouts that fail
on one call; it lists its own arms (GiGPO's among them: its anchor states come from the calculator) and budgets.

Writes `bench/results/headroom/headroom[_quick].{json,md,png}`: `tasks` -> `arms` -> metric -> `mean`, `ci_low`, `ci_high`,
`n_seeds`, plus each arm's `localization` and `diagnostics`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

from bench import learning, teacher_sweep
from bench.harness import REPO_ROOT, jobs, oracles, reports, results_dir, runs, stats

RESULTS_DIR = results_dir("headroom")

TASKS = {
    "arith": {
        "recipe": "recipes/tiny/config_arith.yaml",
        # trained to use the reference answer and the worked solution in its teacher prompt (data/README.md)
        "model": "data/tiny-qwen3-arith-sol35",
        "eval": learning.TASKS["math"]["eval"],
        "error_site": "arith",
        # the teacher sees the worked solution (data/arith's `reference_solution`) unless an arm says otherwise
        "overrides": ["--teacher_reference", "solution"],
        "arms": [
            "none",
            "gear-answer",
            "gear-solution",
            "gear-signed",
            "rlsd",
            "oracle-gear",
            "oracle-token",
            "oracle-strong",
        ],
    },
    "calc_long": {
        # chains of 4-6 tool calls (data/calc_long), the paper's regime: long rollouts, a teacher that sees the
        # reference calls and follows them (data/README.md, "Long chains")
        "recipe": "recipes/tiny/config_calc_long.yaml",
        "model": "data/tiny-qwen3-calc-long",
        "eval": {
            "dataset": "data/calc_long",
            "split": "test",
            "dataset_format": "tool_use",
            "max_new_tokens": 512,
            "environment": "calculator",
            "max_tool_calling_iterations": 8,
        },
        "error_site": "tools",
        "arms": ["none", "gear", "gear-signed", "rlsd", "gigpo", "gear+gigpo", "oracle-gear"],
        # 20 steps, not arith's 40: a run costs 4x an arith one at half the steps (see BUDGETS)
        "full": {"max_steps": 20, "eval_limit": 100, "problems": 24},
        "quick": {"arms": ["none", "oracle-gear"], "seeds": [0], "max_steps": 2, "eval_limit": 4, "problems": 2},
    },
}
"""Task -> recipe, warm start, held-out split, the label that locates a failed rollout's first wrong token and,
optionally, recipe overrides for every arm of the task (`overrides`, before the arm's own), the task's arms (`arms`: a
budget runs those of its arms that the task has) and settings of each budget (`full`, `quick`: on top of `BUDGETS`;
see `task_budget`)."""

ORACLE_STRONG = ["--weight_alpha", "3", "--weight_eps", "0.9", "--weight_norm", "none"]
"""The strongest oracle weighting we can justify. alpha 3 puts the oracle's signal of 1 at the clip (exp(3) > 1.9), so
every blamed token sits at the bound; eps 0.9 is the widest clip short of GEAR's limit of 1, so a blamed token in a
failed rollout gets 1.9x GRPO's push (1.5x with the defaults), and an innocent prefix keeps 1x; without mean-1
rescaling that extra blame is added, not taken from the correct prefix of the same rollout (with rescaling the prefix
would be pushed down *less* than under GRPO, and the failed rollout's total advantage conserved)."""

ARMS = {
    "none": {"credit": "none"},
    "gear": {"credit": "gear"},
    "gear-answer": {"credit": "gear", "overrides": ["--teacher_reference", "answer"]},
    "gear-solution": {"credit": "gear", "overrides": ["--teacher_reference", "solution"]},
    "gear-signed": {"credit": "gear-signed"},
    "rlsd": {"credit": "rlsd"},
    "oracle-gear": {"credit": "gear", "oracle": "from_error"},
    "oracle-token": {"credit": "token", "oracle": "error_token"},
    "oracle-strong": {"credit": "gear", "oracle": "from_error", "overrides": ORACLE_STRONG},
    "gigpo": {"credit": "gigpo", "tools_only": True},
    "gear+gigpo": {"credit": "gear+gigpo", "tools_only": True},
}
"""Arm -> credit mode, oracle signal (None: the teacher's KL), recipe overrides and, for GiGPO, `tools_only` (its
anchor states come from a tool environment's state, so only a tool task lists it). `gear`, `gear-signed` and `rlsd`
use the task's teacher (on arith: the worked solution, the task's `overrides`); `gear-answer` and `gear-solution` name
what GEAR's teacher sees (`teacher_reference`): the final answer (the paper's setting, and what every earlier study's
arith teacher saw) or the worked solution."""

BUDGETS = {
    "full": {
        "arms": [arm for arm, spec in ARMS.items() if not spec.get("tools_only")],
        "seeds": list(range(8)),
        "max_steps": 40,
        "eval_limit": None,
        "problems": 48,
        "set": [],
    },
    "quick": {
        "arms": ["none", "gear-answer", "gear-solution", "gear-signed", "oracle-gear"],  # rlsd: same teacher pass
        "seeds": [0, 1],
        "max_steps": 3,
        "eval_limit": 16,
        "problems": 4,
        "set": ["per_device_train_batch_size=16"],  # 2 problems x 8 samples per step
    },
}
"""The full budget is bench/teacher_sweep.py's (40 steps of 8 problems x 8 samples, 200 held-out problems). Measured on
arith with `tiny-qwen3-arith-sol35` (each job's `cpu_s`: its worker process's CPU seconds, one torch thread; one
seed of none, gear-answer, gear-solution, gear-signed, rlsd and oracle-gear on 2 cores shared with other jobs): a
run costs 86 (`none`) to 97 (`rlsd`) CPU-seconds, training and scoring; a probe of 48 problems 14-15, the start 12.
The full arith study, 8 arms x 8 seeds = 64 runs plus 7 probes, used about 1.5 CPU-hours (each arm's mean 81-87
CPU-seconds a run, `cpu_s_per_run` in the report); its last 23 runs took 31 minutes on 2 workers. `--quick`
(5 arms x 2 seeds, 3 steps of 2 problems, 16 held-out problems, 5 probes of 4 problems; `rlsd` left out, its teacher
pass is `gear-solution`'s) used 150 CPU-seconds, mostly starting 15 worker processes, and took 4.7 minutes on the
shared cores.

calc_long's full budget (`TASKS["calc_long"]["full"]`: 20 steps of 4 problems x 8 samples, 100 held-out problems,
probes of 24) costs more a run, so it trains half as many steps as arith. A 20-step run of `none` or `oracle-gear`
from `tiny-qwen3-calc-long` took 348-380 CPU-seconds (280-310 training on rollouts of about 180 tokens and 5 calls,
70-80 scoring greedy and 2 samples on 100 problems), one torch thread per worker on 2 busy cores (about 10 minutes
of wall time for a pair of runs); the start 94, a probe 73. 7 arms x 8 seeds is 56 runs, about 6 CPU-hours (the
teacher-free `none` and `gigpo` somewhat less); a 40-step budget would double the training. Its quick budget (none
and oracle-gear, one seed, 2 steps of 2 problems, 4 held-out problems) adds 4 jobs, about 1.5 CPU-minutes, to
arith's."""


METRICS = teacher_sweep.METRICS


def task_budget(task: str, quick: bool) -> dict:
    """A task's budget: `BUDGETS["quick"]` or `["full"]`, with the full budget's arms replaced by the task's own
    (`TASKS[task]["arms"]`, where it lists them), then the task's own settings for that budget
    (`TASKS[task]["quick"]` / `["full"]`) on top."""
    kind = "quick" if quick else "full"
    budget = dict(BUDGETS[kind])
    if not quick and "arms" in TASKS[task]:
        budget["arms"] = list(TASKS[task]["arms"])
    budget.update(TASKS[task].get(kind, {}))
    return budget


# The label oracle is bench.harness.oracles' (a credit mode registered in the worker process, `oracles.register`).
oracle_signal, error_site_for = oracles.oracle_signal, oracles.error_site_for


# ---------------------------------------------------------------------------------------------------------------------
# Jobs (each in its own process)
# ---------------------------------------------------------------------------------------------------------------------


def probe(job: dict) -> dict:
    """Localization and label-free diagnostics of one arm's credit on `problems` x num_generations rollouts of held-out
    problems, sampled as training samples them with the warm start."""
    runs.worker_setup()
    from bench.credit_sites import label_free
    from gear_trl.inspect_credit import sample_credit

    out_dir = Path(job["work_dir"]) / job["key"]
    out_dir.mkdir(parents=True, exist_ok=True)
    trainer, dataset = runs.build_probe_trainer(job, out_dir)  # an oracle arm's credit is its registered mode
    rollouts = sample_credit(trainer, dataset, job["problems"] * trainer.num_generations)
    error_site = error_site_for(job["error_site"])
    result = {
        "spec": probe_spec(job),
        "localization": teacher_sweep.localization([tuple(pair) for pair in rollouts], error_site),
        "label_free": label_free([row for _, row in rollouts]),
    }
    (out_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result


def probe_spec(job: dict) -> dict:
    spec = {key: job[key] for key in ("recipe", "recipe_sha", "mode", "overrides", "oracle", "problems")}
    if job.get("oracle_options"):  # only where set, so that caches made before the key existed stay valid
        spec["oracle_options"] = job["oracle_options"]
    return spec


def dispatch(job: dict) -> dict:
    """Runs one job in its own worker process (`run_jobs` spawns one per job) and adds that process's CPU seconds to
    its cached result (`cpu_s`: imports, training and scoring; the study's cost, measured). A job with an `oracle`
    trains (or probes) under that oracle's credit mode, registered in this process (`bench.harness.runs.credit_of`)."""
    result = probe(job) if job["kind"] == "probe" else jobs.dispatch(job)
    return jobs.with_cpu_seconds(result, job)


def cached(job: dict) -> dict | None:
    return jobs.read_cached(job, probe_spec(job) if job["kind"] == "probe" else learning.job_spec(job))


# ---------------------------------------------------------------------------------------------------------------------
# Statistics and report (pure)
# ---------------------------------------------------------------------------------------------------------------------


nan_mean = stats.nan_mean


def arm_summary(runs: list[dict], arm: str, window: int, baseline: str = "none") -> dict:
    """An arm's cell: per metric its own mean and 95% t-interval over seeds, and (arms other than the baseline) the
    paired difference from the baseline as `<metric>_minus_<baseline>`; the training diagnostics as means over seeds
    of each run's mean over the steps that logged them."""
    mine = [r for r in runs if r["label"] == arm]
    out = {}
    for metric in METRICS:
        out[metric] = teacher_sweep.paired_interval([teacher_sweep.run_metric(r, metric, window) for r in mine])
    if arm != baseline:
        for metric, cell in teacher_sweep.paired(runs, arm, baseline, window).items():
            out[f"{metric}_minus_{baseline}"] = cell
    out["cpu_s_per_run"] = nan_mean(r.get("cpu_s") for r in mine)
    out["diagnostics"] = {
        f"training_{key}": nan_mean(nan_mean(r.get(key) or []) for r in mine)
        for key in ("kl_failed_over_passed", "kl_floor", "onsets_teacher_supported_frac")
    }
    return out


def build_report(tasks: dict, window: int) -> dict:
    """`tasks`: name -> {"arms": [...], "runs": [...], "probes": {arm: probe result}, "start": start result,
    optionally "window": the task's final window, in steps (default `window`)}."""
    out = {}
    for name, task in tasks.items():
        arms = {}
        for arm in task["arms"]:
            cell = arm_summary(task["runs"], arm, task.get("window", window))
            found = task["probes"].get(arm)
            if found is not None:
                cell["localization"] = found["localization"]
                cell["diagnostics"].update(found["label_free"])
            arms[arm] = cell
        start = (task.get("start") or {}).get("eval", {})
        out[name] = {"start": start, "arms": arms}
    return out


def plot(report: dict, path: Path) -> None:
    """Per task, each arm's paired difference from `none` with its interval, one panel per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = report["tasks"]
    fig, axes = plt.subplots(len(tasks), len(METRICS), figsize=(11, 3.6 * len(tasks)), squeeze=False)
    for row, (task, body) in enumerate(tasks.items()):
        arms = [a for a in body["arms"] if a != "none"]
        for ax, (metric, title) in zip(axes[row], METRICS.items(), strict=True):
            for x, arm in enumerate(arms):
                cell = body["arms"][arm].get(f"{metric}_minus_none")
                if cell is None or math.isnan(cell["mean"]):
                    continue
                low = 0.0 if math.isnan(cell["ci_low"]) else cell["mean"] - cell["ci_low"]
                high = 0.0 if math.isnan(cell["ci_high"]) else cell["ci_high"] - cell["mean"]
                color = "tab:purple" if arm.startswith("oracle") else "tab:blue"
                ax.errorbar([x], [cell["mean"]], yerr=[[low], [high]], fmt="o", capsize=4, color=color)
            ax.axhline(0, color="gray", lw=1, ls="--")
            ax.margins(x=0.15)
            ax.set_xticks(range(len(arms)), arms, rotation=20, fontsize=8)
            ax.set_ylabel(f"arm - none, {title}", fontsize=8)
            ax.set_title(f"{task}: {title}, paired by seed, 95% t-interval", fontsize=9)
            ax.grid(alpha=0.3)
    fig.suptitle(report["title"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(report: dict) -> str:
    """One table per task: each arm's metrics against `none`, its localization and its diagnostics."""
    num = teacher_sweep._num
    lines = []
    for task, body in report["tasks"].items():
        start = body["start"]
        lines += [
            f"## {task} (start: greedy {num(start.get('greedy_accuracy'))}, "
            + f"sampled {num(start.get('sampled_accuracy'))})",
            "",
            (
                "| arm | seeds | reward - none | sampled acc. - none | onset at error (chance) | blame ratio (random) "
                "| mass moved | KL failed / passed | KL floor | passed onsets teacher-supported |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for arm, cell in body["arms"].items():
            loc, diag = cell.get("localization") or {}, cell["diagnostics"]
            diffs = [
                teacher_sweep._cell(cell[f"{m}_minus_none"]) if f"{m}_minus_none" in cell else "(baseline)"
                for m in METRICS
            ]
            lines.append(
                f"| `{arm}` | {cell['reward_last']['n_seeds']} | {diffs[0]} | {diffs[1]} "
                f"| {num(loc.get('onset_rate'))} ({num(loc.get('onset_rate_random'))}) "
                f"| {num(loc.get('blame_ratio'))} ({num(loc.get('blame_ratio_random'))}) "
                f"| {num(loc.get('moved_share'), 3)} | {num(diag.get('training_kl_failed_over_passed'))} "
                f"| {num(diag.get('training_kl_floor'), 4)} | {num(diag.get('training_onsets_teacher_supported_frac'))} |"
            )
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------------------


def task_arms(task: dict, requested: list[str], explicit: bool = False) -> list[str]:
    """The arms to run on `task`: the `requested` ones the task has (all of them when it lists none, or when the user
    named them, `explicit`), `none` first: every arm is paired against it."""
    arms = [arm for arm in requested if explicit or "arms" not in task or arm in task["arms"]]
    return ["none", *(arm for arm in arms if arm != "none")]


def arm_overrides(task: dict, arm: str, budget_overrides: list[str] = ()) -> list[str]:
    """Recipe overrides of `arm`'s runs on `task`: its warm start, the task's overrides, the budget's, the arm's own
    (a later flag wins)."""
    return ["--model_name_or_path", task["model"], *task.get("overrides", []), *budget_overrides,
            *ARMS[arm].get("overrides", [])]  # fmt: skip


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="arith: 5 arms x 2 seeds, 3 steps; calc_long: none, oracle-gear x 1 seed, 2 steps.",
    )
    parser.add_argument("--tasks", nargs="+", choices=sorted(TASKS), help="Default: all.")
    parser.add_argument("--arms", nargs="+", choices=sorted(ARMS), help="Default: the budget's that the task has.")
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work-dir", help="Default: outputs/headroom[_quick].")
    parser.add_argument("--out-dir", default=str(RESULTS_DIR))
    parser.add_argument("--fresh", action="store_true", help="Ignore cached runs.")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="Rewrite the committed .md and .png (--quick: the quick run's) from the JSON and stop.",
    )
    parser.add_argument("--no-png", action="store_true", help="With --report-only: the .md only.")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="Train nothing: report the runs already cached (as headroom[_quick]_partial.* while any is missing).",
    )
    return parser


def main(argv: list[str] | None = None, log=print) -> dict:
    import yaml

    args = make_parser().parse_args(argv)
    name = "headroom" + ("_quick" if args.quick else "")
    if args.report_only:
        return reports.rewrite_from_json(Path(args.out_dir) / f"{name}.json", plot, markdown, png=not args.no_png,
                                         log=log)  # fmt: skip
    task_names = args.tasks or list(TASKS)
    work_root = Path(args.work_dir or REPO_ROOT / "outputs" / name)
    wall = time.perf_counter()

    planned, plan, budgets = [], {}, {}
    for task_name in task_names:
        task = TASKS[task_name]
        budget = task_budget(task_name, args.quick)
        arms = task_arms(task, args.arms or budget["arms"], explicit=bool(args.arms))
        seeds = args.seeds or budget["seeds"]
        max_steps = args.max_steps or budget["max_steps"]
        budgets[task_name] = {**budget, "arms": arms, "seeds": seeds, "max_steps": max_steps}
        overrides = [arg for item in budget["set"] for arg in (f"--{item.partition('=')[0]}", item.partition("=")[2])]
        recipe = yaml.safe_load((REPO_ROOT / task["recipe"]).read_text())
        train_eval = None  # greedy accuracy on the problems trained on, where the recipe trains on a small set
        if recipe.get("max_train_samples"):
            train_eval = {"split": "train", "limit": min(recipe["max_train_samples"], budget["eval_limit"] or 10**9)}
        common = {
            "recipe": task["recipe"],
            "eval": task["eval"],
            "eval_limit": budget["eval_limit"],
            "train_eval": train_eval,
            "temperature": float(recipe.get("temperature", 1.0)),
            "recipe_sha": learning.recipe_values_sha(recipe),
            "error_site": task["error_site"],
            # keyed on the weights: a remade warm start is never mixed with old runs
            "work_dir": str(work_root / f"{task_name}-{jobs.sha_of(task['model'])}"),
            "task": task_name,
        }
        start = {"kind": "start", "key": "start", "model": task["model"], **common}
        task_jobs = {"start": start, "arms": arms, "probes": {}, "train": []}
        for arm in arms:
            spec = ARMS[arm]
            if spec["credit"] not in ("none", "gigpo"):  # localization of a teacher's (or the oracle's) credit
                task_jobs["probes"][arm] = {
                    "kind": "probe", "key": f"probe__{learning.run_key(arm, 0)}", "mode": spec["credit"],
                    "oracle": spec.get("oracle"), "overrides": arm_overrides(task, arm),
                    "problems": budget["problems"], **common,
                }  # fmt: skip
        for seed in seeds:  # seed-major: a cut-off study has every arm's first seeds
            for arm in arms:
                spec = ARMS[arm]
                task_jobs["train"].append({
                    "kind": "train", "key": learning.run_key(arm, seed), "label": arm, "mode": spec["credit"],
                    "oracle": spec.get("oracle"), "seed": seed, "max_steps": max_steps,
                    "overrides": arm_overrides(task, arm, overrides), **common,
                })  # fmt: skip
        plan[task_name] = task_jobs
        planned += [start, *task_jobs["probes"].values(), *task_jobs["train"]]

    results = jobs.run_jobs(
        planned, args.workers, args.fresh, log, cached_only=args.cached_only, dispatch=dispatch, cached=cached
    )

    def got(job):
        return results.get((job["work_dir"], job["key"]))

    missing = sum(got(job) is None for job in planned)
    if missing:  # --cached-only on an unfinished study: never written under the finished study's name
        name += "_partial"

    tasks = {
        task_name: {
            "arms": task_jobs["arms"],
            "window": learning.final_window(budgets[task_name]["max_steps"]),
            "start": got(task_jobs["start"]),
            "probes": {arm: got(job) for arm, job in task_jobs["probes"].items() if got(job) is not None},
            "runs": [got(job) for job in task_jobs["train"] if got(job) is not None],
        }
        for task_name, task_jobs in plan.items()
    }
    report = {
        "title": "Headroom: each arm against GRPO, paired by seed ("
        + "; ".join(f"{t}: {b['max_steps']} steps, seeds {b['seeds']}" for t, b in budgets.items())
        + (", quick" if args.quick else "")
        + (f"; partial: {len(planned) - missing} of {len(planned)} jobs done)" if missing else ")"),
        "config": {
            "arms": {arm: ARMS[arm] for task_jobs in plan.values() for arm in task_jobs["arms"]},
            "tasks": {
                t: {**TASKS[t], "budget": {**b, "window": tasks[t]["window"], "problems_probed": b["problems"]}}
                for t, b in budgets.items()
            },
        },
        **reports.provenance(wall),
        "jobs": {"planned": len(planned), "missing": missing},
        "tasks": build_report(tasks, window=1),
        "runs": {t: body["runs"] for t, body in tasks.items()},
    }
    out_dir = Path(args.out_dir)
    reports.write_results(report, out_dir, name, plot, markdown, log)
    log(f"wrote {out_dir / (name + '.json')}, .png and .md in {report['wall_s_this_invocation'] / 60:.1f} min")
    return report


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
