"""When does GEAR pay? GEAR against GRPO on the arithmetic testbed, from warm starts whose teachers differ in quality.

GEAR's teacher is the policy itself shown the reference answer, so how much it helps depends on how well the model
has learned to *use* a reference in its prompt. The warm starts in `TEACHERS` (data/README.md, "Teachers of graded
quality") differ only in the share of SFT rows that carry the reference (0%, 30%, 70%) and where their SFT stopped;
each leaves the plain student partly right. For each one the script measures:

- the teacher: sampled accuracy (T = 1) on the 200 held-out problems with the reference in the prompt, beside the
  student's (`gear_trl.evaluate`, as bench/learning.py scores a start);
- localization, from the label the synthetic task has (the first token where a failed rollout departs from the
  reference solution, `bench/credit_sites.arith_error_site`), on rollouts sampled as training samples them
  (`gear_trl.inspect_credit.sample_credit`, live teacher): how often a segment opens at the error token, the error token's
  *blame ratio* (its GEAR weight over the mean weight of the rest of the rollout, in failed rollouts with a negative
  advantage: above 1 means more of the blame lands on the mistake), and the share of advantage mass GEAR moves
  (half the |advantage|-weighted sum of |w_t - 1| over the sum of |advantage| x tokens);
- the label-free diagnostics the trainer logs (`gear_trl.credit.failure_contrast`: reverse KL in failed over passed
  rollouts, share of segment onsets in failed rollouts), on the same rollouts and, where the runs logged them, during
  training;
- `none` (GRPO) against `gear`, paired by seed, same recipe (recipes/tiny/config_arith.yaml), steps, batch and seeds,
  with the paired difference of the final-window training reward and of held-out sampled accuracy and its 95%
  t-interval; at the best-localizing teacher a small `weight_alpha`/`weight_eps` sweep, and one seed each of
  `teacher: base` (LoRA), `divergence: topk`, `divergence: sampled`, `weight_lambda: 0.5` as a side table.

Runs use the harness's training and scoring (`bench.harness.runs`) and job runner (`bench.harness.jobs`), cached
per teacher under `--work-dir` (keyed on the warm start's weights), so an interrupted sweep picks up where it stopped.

    python -m bench.teacher_sweep --quick        # 3 teachers x {none, gear} x 2 seeds, 3 small steps: < 5 minutes
    python -m bench.teacher_sweep                # the full sweep (README, "When does GEAR help?")
    python -m bench.teacher_sweep --readme       # print that README section from the committed JSON
    python -m bench.teacher_sweep --report-only  # rewrite the committed .md and .png from the committed JSON

Writes `bench/results/teacher_sweep/teacher_sweep[_quick].{json,png,md}`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import time
from pathlib import Path

from bench import learning
from bench.harness import REPO_ROOT, jobs, reports, results_dir, runs, stats

RESULTS_DIR = results_dir("teacher_sweep")
RECIPE = "recipes/tiny/config_arith.yaml"

TEACHERS = [
    {
        "name": "hint0",
        "model": "bench/results/teacher_sweep/tiny-qwen3-arith-hint0",  # this study's alone: kept beside it
        "hint_frac": 0.0,
        "how": "SFT without reference rows: the teacher prompt is as foreign to the model as to a student",
    },
    {
        "name": "hint30",
        "model": "data/tiny-qwen3-arith",
        "hint_frac": 0.3,
        "how": "the testbed's warm start: 30% of SFT rows carry the reference",
    },
    {
        "name": "hint70",
        "model": "data/tiny-qwen3-arith-hint70",
        "hint_frac": 0.7,
        "how": "70% of SFT rows carry the reference: the teacher copies it",
    },
]
"""The warm starts compared, weakest teacher first (data/README.md says how each was made)."""

CORE_ARMS = ["none", "gear"]
SWEEP_ARMS = ["gear:weight_alpha=2", "gear:weight_alpha=2,weight_eps=0.8"]
"""Extra GEAR settings tried at the best-localizing teacher, with every seed (defaults: alpha 1, eps 0.5)."""
SIDE_ARMS = [
    "gear:teacher=base,use_peft=true",
    "gear:divergence=topk",
    "gear:divergence=sampled",
    "gear:weight_lambda=0.5",
]
"""One seed each at the best-localizing teacher, beside `none` and `gear` of the same seed."""
METRICS = {
    "reward_last": "final-window training reward",
    "sampled_accuracy": "held-out sampled accuracy",
}
"""The paired metrics: GEAR minus GRPO per seed."""
BUDGETS = {
    "full": {"seeds": [0, 1, 2, 3, 4], "max_steps": 40, "eval_limit": None, "problems": 48, "set": []},
    "quick": {
        "seeds": [0, 1],
        "max_steps": 3,
        "eval_limit": 16,
        "problems": 4,
        "set": ["per_device_train_batch_size=16"],  # 2 problems x 8 samples per step
    },
}


# ---------------------------------------------------------------------------------------------------------------------
# Statistics (pure)
# ---------------------------------------------------------------------------------------------------------------------


# The interval helpers are bench.harness.stats' (gear_trl.table's, which `gear-trl-table` shares).
t_quantile, paired_interval = stats.t_quantile, stats.paired_interval


def run_metric(run: dict, metric: str, window: int) -> float | None:
    if metric == "reward_last":
        return learning.window_mean(run["reward"], -window)
    return (run.get("eval") or {}).get(metric)


def paired(runs: list[dict], arm: str, baseline: str, window: int) -> dict:
    """Per metric: `arm` minus `baseline` over the seeds both have run."""
    by_seed = {label: {r["seed"]: r for r in runs if r["label"] == label} for label in (arm, baseline)}
    seeds = sorted(set(by_seed[arm]) & set(by_seed[baseline]))
    return {
        metric: paired_interval(
            [
                run_metric(by_seed[arm][s], metric, window) - run_metric(by_seed[baseline][s], metric, window)
                for s in seeds
            ]
        )
        for metric in METRICS
    }


def is_onset(segment_ids: list[int], index: int) -> bool:
    return segment_ids[index] >= 0 and (index == 0 or segment_ids[index - 1] != segment_ids[index])


def localization(rollouts: list[tuple[list[str], dict]], error_site, seed: int = 0) -> dict:
    """Label-based localization of GEAR's credit over sampled rollouts (`(tokens, trace_row)` pairs).

    `error_site(tokens, row)` gives the index of a failed rollout's first wrong token (or None). Returned: the share
    of located failed rollouts with a segment opening at the error token (`onset_rate`) and at a random model token
    (`onset_rate_random`, the chance level); the mean blame ratio, the error token's weight over the mean weight of
    the rollout's other model tokens, in located failed rollouts with a negative advantage (`blame_ratio`; inf where
    every other token weighs 0 and the error does not), and the same for a random token (`blame_ratio_random`); the
    share of advantage mass moved, sum_i |A_i| * (1/2) sum_t |w_t - 1| / sum_i |A_i| * n_i over every rollout with a
    nonzero advantage; and the share of located failed rollouts whose first segment opens at or before the error token
    (`first_onset_by_error`: where `failed_prefix_weight` cuts a failed rollout's blame, the error keeps its own)."""
    rng = random.Random(seed)
    onsets, random_onsets, ratios, random_ratios, by_error = [], [], [], [], []
    failed = unlocated = 0
    moved = total = 0.0
    for tokens, row in rollouts:
        model = [k for k, m in enumerate(row["mask"]) if m]
        advantage = row["advantage"]
        if model and advantage:
            moved += abs(advantage) * 0.5 * sum(abs(row["weights"][k] - 1.0) for k in model)
            total += abs(advantage) * len(model)
        if row.get("reward") != 0.0 or not model:
            continue
        failed += 1
        index = error_site(tokens, row)
        if index is None:
            unlocated += 1
            continue
        other = rng.choice(model)
        onsets.append(is_onset(row["segment_ids"], index))
        first = next((k for k in model if row["segment_ids"][k] >= 0), None)
        by_error.append(first is not None and first <= index)
        random_onsets.append(is_onset(row["segment_ids"], other))
        if advantage < 0 and len(model) > 1:
            for k, out in ((index, ratios), (other, random_ratios)):
                rest = statistics.fmean(row["weights"][j] for j in model if j != k)
                # an oracle can weight every other token 0 (`oracle-first-error`): the ratio is then unbounded
                out.append(row["weights"][k] / rest if rest else math.inf if row["weights"][k] > 0 else 0.0)

    def mean(values):
        return statistics.fmean(values) if values else None

    return {
        "rollouts": len(rollouts),
        "failed": failed,
        "located": failed - unlocated,
        "onset_rate": mean(onsets),
        "onset_rate_random": mean(random_onsets),
        "blame_ratio": mean(ratios),
        "blame_ratio_random": mean(random_ratios),
        "blamed_rollouts": len(ratios),
        "moved_share": moved / total if total else None,
        "first_onset_by_error": mean(by_error),
    }


# ---------------------------------------------------------------------------------------------------------------------
# Jobs (each in its own process)
# ---------------------------------------------------------------------------------------------------------------------


load_script = jobs.load_script


def probe(job: dict) -> dict:
    """The teacher's accuracy (reference in the prompt, sampled at T = 1) on the held-out split, and GEAR's credit on
    `problems` x num_generations rollouts of held-out problems sampled as training samples them (saved raw, so the
    localization figures are computed at report time)."""
    runs.worker_setup()
    import torch
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gear_trl.inspect_credit import sample_credit

    out_dir = Path(job["work_dir"]) / "probe"
    out_dir.mkdir(parents=True, exist_ok=True)
    warm = load_script("make_warm_start")
    rows = list(load_dataset(job["eval"]["dataset"], split=job["eval"]["split"]))[: job["eval_limit"] or None]
    model = AutoModelForCausalLM.from_pretrained(job["model"], dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(job["model"])
    teacher = warm.evaluate(model, tokenizer, rows, do_sample=True, teacher=True, seed=0)
    student = warm.evaluate(model, tokenizer, rows, do_sample=True, teacher=False, seed=0)
    del model

    probe_job = {**job, "overrides": ["--model_name_or_path", job["model"]]}
    trainer, dataset = runs.build_probe_trainer(probe_job, out_dir, credit="gear")
    rollouts = sample_credit(trainer, dataset, job["problems"] * trainer.num_generations)
    result = {
        "model": job["model"],
        "spec": probe_spec(job),
        "teacher_accuracy": teacher["accuracy"],
        "student_sampled_accuracy_1": student["accuracy"],
        "n": len(rows),
        "rollouts": [[tokens, row] for tokens, row in rollouts],
    }
    (out_dir / "result.json").write_text(json.dumps(result))
    return result


def probe_spec(job: dict) -> dict:
    return {key: job[key] for key in ("model", "problems", "eval_limit")}


def dispatch(job: dict) -> dict:
    if job["kind"] == "probe":
        return probe(job)
    return learning.eval_start(job) if job["kind"] == "start" else learning.train_one(job)


def cached(job: dict) -> dict | None:
    return jobs.read_cached(job, probe_spec(job) if job["kind"] == "probe" else learning.job_spec(job))


def run_jobs(
    job_list: list[dict], workers: int, fresh: bool, log, cached_only: bool = False, dispatch=dispatch, cached=cached
) -> dict:
    """`bench.harness.jobs.run_jobs` with this study's job kinds (`probe`, `start`, `train`) as the default."""
    return jobs.run_jobs(job_list, workers, fresh, log, cached_only=cached_only, dispatch=dispatch, cached=cached)


# ---------------------------------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------------------------------


def diagnostic(probe_result: dict, runs: list[dict]) -> dict:
    """The label-free diagnostics on the probe's rollouts and, where logged, their mean over the GEAR runs."""
    out = {}
    try:
        from bench.credit_sites import label_free

        out.update(label_free([row for _, row in probe_result["rollouts"]]))
    except ImportError:  # a checkout without the label-free diagnostics
        pass
    for key in ("kl_failed_over_passed", "onsets_in_failed_frac"):
        values = [
            learning.window_mean(run.get(key) or [], 0) for run in runs if run["label"] == "gear" and run.get(key)
        ]
        values = [v for v in values if not math.isnan(v)]
        out[f"training_{key}"] = statistics.fmean(values) if values else None
    return out


def label_error_site():
    from bench.credit_sites import arith_error_site

    return arith_error_site


def build_report(teachers, probes, starts, runs, best, config) -> dict:
    window = config["window"]
    error_site = label_error_site()
    rows, paired_out = [], {}
    for teacher in teachers:
        name = teacher["name"]
        mine = [r for r in runs if r["teacher"] == name]
        rows.append({
            **teacher,
            "teacher_accuracy": probes[name]["teacher_accuracy"],
            "student_sampled_accuracy": starts[name]["eval"]["sampled_accuracy"],
            "student_greedy_accuracy": starts[name]["eval"]["greedy_accuracy"],
            "localization": localization([tuple(pair) for pair in probes[name]["rollouts"]], error_site),
            "diagnostic": diagnostic(probes[name], mine),
        })  # fmt: skip
        paired_out[name] = paired(mine, "gear", "none", window)
    mine = [r for r in runs if r["teacher"] == best]
    sweep = {"teacher": best, "arms": {}}
    for text in ["gear", *SWEEP_ARMS]:
        label = learning.parse_arm(text)[0]
        if any(r["label"] == label for r in mine):
            sweep["arms"][label] = paired(mine, label, "none", window)
    ranked = [a for a in sweep["arms"] if not math.isnan(sweep["arms"][a]["reward_last"]["mean"])]
    sweep["best"] = max(ranked, key=lambda a: sweep["arms"][a]["reward_last"]["mean"]) if ranked else None
    side = []
    side_labels = {learning.parse_arm(text)[0] for text in SIDE_ARMS}
    for text in ["none", "gear", *SIDE_ARMS] if any(r["label"] in side_labels for r in mine) else []:
        label = learning.parse_arm(text)[0]
        for run in mine:
            if run["label"] == label and run["seed"] == config["seeds"][0]:
                side.append({"arm": label, "seed": run["seed"],
                             **{m: run_metric(run, m, window) for m in METRICS}})  # fmt: skip
    return {"teachers": rows, "paired": paired_out, "best_teacher": best, "sweep": sweep, "side": side}


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(METRICS), figsize=(11, 4.2))
    for ax, (metric, title) in zip(axes, METRICS.items(), strict=True):
        for k, teacher in enumerate(report["teachers"]):
            cell = report["paired"][teacher["name"]][metric]
            x = teacher["localization"]["blame_ratio"]
            if x is None or math.isnan(cell["mean"]):
                continue
            low = cell["mean"] - cell["ci_low"] if not math.isnan(cell["ci_low"]) else 0.0
            high = cell["ci_high"] - cell["mean"] if not math.isnan(cell["ci_high"]) else 0.0
            ax.errorbar([x], [cell["mean"]], yerr=[[low], [high]], fmt="o", capsize=4)
            ax.annotate(f"{teacher['name']} (teacher acc. {teacher['teacher_accuracy']:.2f})", (x, cell["mean"]),
                        textcoords="offset points", xytext=(6, 6 if k % 2 else -12), fontsize=8)  # fmt: skip
        ax.margins(x=0.3)  # room for the labels
        ax.axhline(0, color="gray", lw=1, ls="--")
        ax.axvline(1, color="gray", lw=0.8, ls=":")
        ax.set_xlabel("localization: error token's blame ratio (1 = no better than the rest)")
        ax.set_ylabel(f"GEAR - GRPO, {title}")
        ax.set_title(f"{title}: paired difference, 95% t-interval", fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(report["title"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _num(value, digits: int = 2) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _cell(cell: dict, digits: int = 3) -> str:
    if math.isnan(cell["mean"]):
        return "n/a"
    if math.isnan(cell["ci_low"]):
        return f"{cell['mean']:+.{digits}f} (1 seed)"
    return f"{cell['mean']:+.{digits}f} [{cell['ci_low']:+.{digits}f}, {cell['ci_high']:+.{digits}f}]"


def verdict(cell: dict) -> str:
    if math.isnan(cell["ci_low"]):
        return "undetermined"
    if cell["ci_low"] > 0:
        return "GEAR better"
    if cell["ci_high"] < 0:
        return "GEAR worse"
    return "no difference resolved"


def tables(report: dict) -> str:
    """The markdown tables: teachers (quality, localization, diagnostics), paired differences, sweep, side table."""
    lines = [
        (
            "| teacher | SFT rows with the reference | teacher acc. (reference in prompt) | student sampled acc. "
            "| onset at error (chance) | blame ratio (random token) | advantage mass moved "
            "| KL failed / passed | onsets in failed (failed tokens) |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t in report["teachers"]:
        loc, diag = t["localization"], t["diagnostic"]
        lines.append(
            f"| `{t['name']}` | {t['hint_frac']:.0%} | {_num(t['teacher_accuracy'])} "
            f"| {_num(t['student_sampled_accuracy'])} "
            f"| {_num(loc['onset_rate'])} ({_num(loc['onset_rate_random'])}) "
            f"| {_num(loc['blame_ratio'])} ({_num(loc['blame_ratio_random'])}) | {_num(loc['moved_share'], 3)} "
            f"| {_num(diag.get('kl_failed_over_passed'))} "
            f"| {_num(diag.get('onsets_in_failed_frac'))} ({_num(diag.get('failed_tokens_frac'))}) |"
        )
    lines += [
        "",
        "| teacher | seeds | GEAR - GRPO, " + " | GEAR - GRPO, ".join(METRICS.values()) + " |",
        "|---|---|" + "---|" * len(METRICS),
    ]
    for name, cells in report["paired"].items():
        n = max(cell["n_seeds"] for cell in cells.values())
        lines.append(f"| `{name}` | {n} | " + " | ".join(_cell(cells[m]) for m in METRICS) + " |")
    sweep = report["sweep"]
    if len(sweep["arms"]) > 1:
        lines += [
            "",
            f"Sweep at `{sweep['teacher']}` (each arm minus GRPO, paired by seed):",
            "",
            "| arm | seeds | " + " | ".join(METRICS.values()) + " |",
            "|---|---|" + "---|" * len(METRICS),
        ]
        for arm, cells in sweep["arms"].items():
            n = max(cell["n_seeds"] for cell in cells.values())
            lines.append(f"| `{arm}` | {n} | " + " | ".join(_cell(cells[m]) for m in METRICS) + " |")
    if report["side"]:
        lines += [
            "",
            f"Side table at `{report['best_teacher']}`, seed {report['side'][0]['seed']} only:",
            "",
            "| arm | " + " | ".join(METRICS.values()) + " |",
            "|---|" + "---|" * len(METRICS),
        ]
        for row in report["side"]:
            lines.append(f"| `{row['arm']}` | " + " | ".join(_num(row[m], 3) for m in METRICS) + " |")
    return "\n".join(lines)


def readme_section(report: dict) -> str:
    """The README's "When does GEAR help?" section, generated from the sweep's JSON."""
    config = report["config"]
    verdicts = {
        name: {metric: verdict(cells[metric]) for metric in METRICS} for name, cells in report["paired"].items()
    }
    wins = [(n, METRICS[m]) for n, v in verdicts.items() for m in METRICS if v[m] == "GEAR better"]
    losses = [(n, METRICS[m]) for n, v in verdicts.items() for m in METRICS if v[m] == "GEAR worse"]
    by_blame = sorted(report["teachers"], key=lambda t: t["localization"]["blame_ratio"] or 0)
    findings = []
    if wins:
        findings.append("GEAR's 95% interval lies above zero for " + ", ".join(f"`{n}` ({m})" for n, m in wins) + ".")
    else:
        findings.append(
            "**GEAR never beats GRPO here**: for no teacher and neither metric does the 95% interval of the paired "
            "difference lie above zero."
        )
    if losses:
        findings.append("It lies below zero for " + ", ".join(f"`{n}` ({m})" for n, m in losses) + ".")
    findings.append(
        "By the error token's blame ratio, lowest to highest: "
        + ", ".join(
            f"`{t['name']}` {_num(t['localization']['blame_ratio'])} (random token "
            f"{_num(t['localization']['blame_ratio_random'])})"
            for t in by_blame
        )
        + "; GEAR - GRPO in final reward, same order: "
        + ", ".join(_cell(report["paired"][t["name"]]["reward_last"]) for t in by_blame)
        + "."
    )
    kl_ratio = [t["diagnostic"].get("kl_failed_over_passed") for t in by_blame]
    if all(v is not None for v in kl_ratio):
        same = kl_ratio == sorted(kl_ratio)
        onset_gap = [
            (t["diagnostic"].get("onsets_in_failed_frac") or 0) - (t["diagnostic"].get("failed_tokens_frac") or 0)
            for t in by_blame
        ]
        findings.append(
            "The label-free KL ratio (failed over passed) "
            + ("rises in the same order" if same else "does not follow that order")
            + ": "
            + ", ".join(_num(v) for v in kl_ratio)
            + "; the share of onsets in failed rollouts minus their share of tokens: "
            + ", ".join(f"{v:+.2f}" for v in onset_gap)
            + "."
        )
    sweep = report.get("sweep") or {}
    if sweep.get("best") and len(sweep.get("arms", {})) > 1:
        cell = sweep["arms"][sweep["best"]]
        findings.append(
            f"At `{sweep['teacher']}` the sweep's best arm by mean final reward is `{sweep['best']}`: "
            f"{_cell(cell['reward_last'])} in final reward, {_cell(cell['sampled_accuracy'])} in held-out sampled "
            "accuracy (picked on the same seeds it is scored on, so its interval flatters it)."
        )
    findings = [f"- {line}" for line in findings]
    caveat = ""
    if not wins and all(v is not None for v in kl_ratio):
        top = by_blame[-1]
        caveat = (
            f" Here a ratio above 1 ({_num(kl_ratio[-1])} for `{top['name']}`) went with a teacher that localizes, "
            f"but its error token took only {_num(top['localization']['blame_ratio'])} times the rest's weight, "
            "and GEAR did not beat GRPO: a ratio above 1 says the teacher sees the failures, not that GEAR will pay."
        )
    return _wrap_prose([
        "## When does GEAR help?",
        "",
        ("GEAR's teacher is the policy shown the reference answer, so it can only blame the token where a rollout goes "
        "wrong if the model has learned to use a reference. `bench/teacher_sweep.py` makes that measurable on the "
        "arithmetic testbed: warm starts that differ in how well their teacher uses the reference (the share of SFT "
        "rows that carry it; data/README.md, \"Teachers of graded quality\"), each with a partly right student, and "
        f"per warm start GRPO (`none`) against `gear` paired by seed ({len(config['seeds'])} seeds, "
        f"{config['max_steps']} steps of {config['batch']}, recipe `{config['recipe']}`), the final reward being the "
        f"mean of the last {config['window']} steps and held-out accuracy 2 samples at T = 1 on the 200 test "
        "problems. Intervals are 95% t-intervals on the per-seed differences."),
        "",
        "```bash",
        "python -m bench.teacher_sweep --quick    # 3 teachers x {none, gear} x 2 seeds, 3 small steps: < 5 minutes",
        "python -m bench.teacher_sweep            # the full sweep, cached and resumable",
        "python -m bench.teacher_sweep --readme   # this section, from bench/results/teacher_sweep/teacher_sweep.json",
        "```",
        "",
        ("Localization is measured where the task gives labels: in failed rollouts sampled as training samples them, "
        "the first token that departs from the reference solution. *Onset at error*: a GEAR segment opens there "
        "(chance: at a random token). *Blame ratio*: that token's weight over the mean weight of the rest of the "
        "rollout when the advantage is negative (above 1: the mistake takes more blame). *Advantage mass moved*: the "
        "share of |advantage| x tokens that GEAR shifts between tokens. The last two columns need no labels (the "
        "trainer logs them as `gear/kl_failed_over_passed` and `gear/onsets_in_failed_frac`; computed here on the same "
        "rollouts with the trainer's functions): the teacher-student KL "
        "in failed over passed rollouts, and the share of segment onsets that fall in failed rollouts beside the "
        "share of tokens that do."),
        "",
        tables(report),
        "",
        "![GEAR - GRPO against localization](bench/results/teacher_sweep/teacher_sweep.png)",
        "",
        *findings,
        "",
        ("**On your own data**, before paying for the teacher passes: run a few GEAR steps and read the label-free "
        "diagnostics the trainer logs. `gear/kl_failed_over_passed` is the teacher-student KL per token in failed "
        "(negative-advantage) rollouts over that in passed ones, `gear/onsets_in_failed_frac` the share of segment "
        "onsets in failed rollouts, to be read against `gear/failed_tokens_frac`, the share of tokens there. A "
        "teacher that knows where the student errs disagrees more with failed rollouts (ratio above 1) and opens "
        "its segments there (onset share above the token share); near 1 and near the token share, GEAR can only "
        "reshuffle the advantage. Where labels exist, `bench/credit_sites.py` measures the onset and blame at the "
        "error token directly." + caveat),
        "",
        ("`bench/headroom.py` asks what GEAR's weighting could do with a perfect teacher (an oracle from the labels), "
        "and tests `credit: gear-signed` and `rlsd` beside it, each arm paired by seed against GRPO."),
    ])  # fmt: skip


def _wrap_prose(blocks: list[str], width: int = 119) -> str:
    """Join the section's blocks, wrapping prose paragraphs and bullets at `width` (tables, code and images as is)."""
    import textwrap

    out = []
    for block in blocks:
        if block.startswith(("|", "```", "!", "python ", "#")) or "\n" in block or len(block) <= width:
            out.append(block)
        else:
            indent = "  " if block.startswith("- ") else ""
            out.append(textwrap.fill(block, width, subsequent_indent=indent, break_long_words=False,
                                     break_on_hyphens=False))  # fmt: skip
    return "\n".join(out)


def readme_block(text: str) -> str:
    """The "## When does GEAR help?" section of a README text (up to the next level-2 heading)."""
    start = text.index("## When does GEAR help?")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)].rstrip("\n")


# ---------------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------------


sha_of = jobs.sha_of


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 seeds, 3 steps of 2 problems, 16 held-out rows.")
    parser.add_argument("--readme", action="store_true", help="Print the README section from the committed JSON.")
    parser.add_argument("--teachers", nargs="+", help="Teacher names (default: all).")
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--no-extras", action="store_true", help="Skip the sweep and the side table.")
    parser.add_argument("--best-teacher", help="Where the sweep and side table run (default: best blame ratio).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work-dir", help="Default: outputs/teacher_sweep[_quick].")
    parser.add_argument("--out-dir", default=str(RESULTS_DIR))
    parser.add_argument("--fresh", action="store_true", help="Ignore cached runs.")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="Rewrite the committed .md and .png (--quick: the quick run's) from the JSON and stop.",
    )
    parser.add_argument("--no-png", action="store_true", help="With --report-only: the .md only.")
    parser.add_argument("--runs-git", help="The commit the cached runs were trained at, where it is not HEAD.")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="Train nothing: report the runs already cached (a partial sweep says how many seeds each cell has).",
    )
    return parser


def main(argv: list[str] | None = None, log=print) -> dict:
    args = make_parser().parse_args(argv)
    name = "teacher_sweep" + ("_quick" if args.quick else "")
    if args.readme:
        report = json.loads((Path(args.out_dir) / "teacher_sweep.json").read_text())
        print(readme_section(report))
        return report
    if args.report_only:
        return reports.rewrite_from_json(
            Path(args.out_dir) / f"{name}.json", plot, tables, png=not args.no_png, log=log
        )
    budget = BUDGETS["quick" if args.quick else "full"]
    seeds = args.seeds or budget["seeds"]
    max_steps = args.max_steps or budget["max_steps"]
    teachers = [t for t in TEACHERS if not args.teachers or t["name"] in args.teachers]
    work_root = Path(args.work_dir or REPO_ROOT / "outputs" / name)
    overrides = [arg for item in budget["set"] for arg in (f"--{item.partition('=')[0]}", item.partition("=")[2])]

    import yaml

    recipe_text = (REPO_ROOT / RECIPE).read_text()
    recipe = yaml.safe_load(recipe_text)
    task = learning.TASKS["math"]
    common = {
        "eval": task["eval"],
        "eval_limit": budget["eval_limit"],
        "train_eval": {"split": "train", "limit": min(recipe["max_train_samples"], budget["eval_limit"] or 10**9)},
        "temperature": float(recipe.get("temperature", 1.0)),
        "recipe_sha": learning.recipe_values_sha(recipe),
    }

    def work_dir(teacher: dict) -> str:  # keyed on the weights: a remade warm start is never mixed with old runs
        return str(work_root / f"{teacher['name']}-{sha_of(teacher['model'])}")

    def train_jobs(teacher: dict, arms: list[str], arm_seeds: list[int]) -> list[dict]:
        planned = []
        for seed in arm_seeds:
            for text in arms:
                label, mode, arm_overrides = learning.parse_arm(text)
                planned.append({
                    "kind": "train", "key": learning.run_key(label, seed), "label": label, "mode": mode,
                    "seed": seed, "recipe": RECIPE, "max_steps": max_steps, "teacher": teacher["name"],
                    "overrides": ["--model_name_or_path", teacher["model"], *overrides, *arm_overrides],
                    "work_dir": work_dir(teacher), **common,
                })  # fmt: skip
        return planned

    # Phase 1: each warm start scored (student, teacher) and its credit sampled; the best-localizing one hosts the
    # sweep. Phase 2: the runs, seed-major so that a cut-off sweep has every teacher's first seeds.
    first = []
    for teacher in teachers:
        base = {"model": teacher["model"], "work_dir": work_dir(teacher), "teacher": teacher["name"], **common}
        first.append({"kind": "start", "key": "start", **base})
        first.append({"kind": "probe", "key": "probe", "recipe": RECIPE, "problems": budget["problems"], **base})
    results = run_jobs(first, args.workers, args.fresh, log)
    probes = {t["name"]: results[work_dir(t), "probe"] for t in teachers}
    starts = {t["name"]: results[work_dir(t), "start"] for t in teachers}
    error_site = label_error_site()
    blame = {
        t["name"]: localization([tuple(p) for p in probes[t["name"]]["rollouts"]], error_site)["blame_ratio"] or 0
        for t in teachers
    }
    best = args.best_teacher or max(blame, key=blame.get)
    best_teacher = next(t for t in teachers if t["name"] == best)

    planned = [job for seed in seeds for t in teachers for job in train_jobs(t, CORE_ARMS, [seed])]
    if not args.quick and not args.no_extras:
        planned += train_jobs(best_teacher, SIDE_ARMS, seeds[:1])  # one seed each: cheap, so first
        planned += [job for seed in seeds for job in train_jobs(best_teacher, SWEEP_ARMS, [seed])]
    start = time.perf_counter()
    results.update(run_jobs(planned, args.workers, args.fresh, log, cached_only=args.cached_only))
    runs = [
        {**results[job["work_dir"], job["key"]], "teacher": job["teacher"]}
        for job in planned
        if (job["work_dir"], job["key"]) in results
    ]

    window = learning.final_window(max_steps)
    batch = recipe["per_device_train_batch_size"]
    for item in budget["set"]:
        if item.startswith("per_device_train_batch_size="):
            batch = int(item.partition("=")[2])
    config = {
        "recipe": RECIPE,
        "overrides": budget["set"],
        "seeds": seeds,
        "max_steps": max_steps,
        "batch": f"{batch // recipe['num_generations']} problems x {recipe['num_generations']} samples",
        "window": window,
        "eval_limit": budget["eval_limit"],
        "problems_probed": budget["problems"],
    }
    where = provenance(start)
    report = {
        "title": f"GEAR vs GRPO by teacher quality ({'quick, ' if args.quick else ''}{RECIPE}, {max_steps} steps, "
        f"seeds {seeds})",
        "config": config,
        **where,
        "runs_git": args.runs_git or where["git"],
        **build_report(teachers, probes, starts, runs, best, config),
        "runs": runs,
    }
    write_results(report, Path(args.out_dir), name, plot, tables, log)
    log(f"wrote {Path(args.out_dir) / (name + '.json')}, .png and .md")
    return report


provenance, write_results = reports.provenance, reports.write_results


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
