"""Where credit matters: each credit arm against GRPO (`none`) on a task family with a horizon knob, and the share of
the ceiling of redistribution that each recovers.

The headroom study (bench/headroom.py) found even its label oracles tied with GRPO on arith and calc_long, where
GRPO itself barely learns and no oracle removed the blame from a failed rollout's correct prefix. This study asks
where token credit can pay at all, on the horizon family (`data/horizon/`, data/README.md): K decisions per problem,
a binary all-correct reward, variants `independent` and `chained`, K a knob. Per variant and K it trains every arm
from the variant's warm start with the same recipe (`recipes/tiny/config_horizon.yaml`), steps, batch and seeds, and
reports, per arm:

- the final-window training reward and held-out sampled accuracy, each as the paired difference from `none` with its
  95% t-interval over seeds (bench/headroom.py's `arm_summary`), and `none`'s start and end accuracy;
- the **share of the ceiling recovered**, (arm - none) / (oracle-prefix - none) per metric, with a paired bootstrap
  interval over seeds, wherever the ceiling's own interval lies above 0 (`share_of_ceiling`);
- localization (onset at the error, blame ratio, advantage mass moved, with their chance levels) and the label-free
  diagnostics, from bench/headroom.py's probes.

Arms: `none` (GRPO); `gear-answer`, `gear-solution` (GEAR with a teacher shown the K results, or the K lines);
`gear-signed`, `rlsd`, `token`, `gear_no_entropy` (with the solution teacher); `gear-drop-prefix` (`gear-solution` with
`failed_prefix_weight: 0`, ours: a failed rollout's tokens before its first onset lose their blame); headroom's
`oracle-gear` and `oracle-strong` (GEAR's weighting fed the label signal); and bench/horizon_oracles.py's
`oracle-prefix` (the most any sign-preserving weighting inside a rollout can do), `oracle-two-sided-0.5` / `-0.9`
(GEAR's shape, able to lower the prefix) and `oracle-process` (each decision's correctness as a per-decision advantage);
and, added after the first runs and not in the full budget's arms: `oracle-process-local` (each step's own correctness:
in `chained` a line that computes right from a wrong carried value is a right step) and `oracle-first-error` (blame on
the first wrong token's line only, neither the prefix nor the lines after it), and `-raw` variants of `oracle-prefix`
and `oracle-first-error` that drop the blame they take off tokens instead of moving it onto the rest (no mean-1
rescale); and `gear-distill` (`gear-solution` with `distillation_weight: 0.5`, ours: the teacher's sampled-token
log-ratio blended into the advantage, a sign per token).

Runs reuse bench/headroom.py's probes and statistics (its `dispatch`, `cached`, `arm_summary`) on the harness's job
runner (`bench.harness.jobs.run_jobs`) and statistics (`bench.harness.stats`), cached under `--work-dir` per variant and K, keyed on the
warm start's weights, so an interrupted study resumes where it stopped; `--cached-only` reports what is cached: per
variant and K the arms with a cached run (the others listed in that cell's `not_run`), `_partial` only where one of
those lacks a seed. `--extend bench/results/horizon/horizon.json` goes on from the committed report where the work dir is
lost (a new machine): the report's training runs are restored into the cache where their spec still holds, and its
cells not planned now are kept as they are, so an arm or a cell is added without training the rest again
(`restore_runs`, `extend_report`).

    python -m bench.horizon --quick      # chained, K 2 and 4: none and oracle-prefix x 2 seeds, 2 steps
    python -m bench.horizon              # 13 arms x 8 seeds x 3 K x 2 variants: see BUDGETS for the cost
    python -m bench.horizon --report-only bench/results/horizon/horizon.json   # rewrite its .md and .png, no training

Writes `bench/results/horizon/horizon[_quick].{json,md,png}`: `variants` -> K -> `arms` -> metric -> `mean`, `ci_low`,
`ci_high`, `n_seeds`, each arm's `share_of_ceiling` (and `share_of_raw_ceiling` and `share_of_process_ceiling`, the
same against `oracle-prefix-raw` and `oracle-process`), and per variant and K `none_accuracy` (start and end).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from pathlib import Path

from bench import headroom, learning, teacher_sweep
from bench.harness import REPO_ROOT, jobs, reports, results_dir, stats

RESULTS_DIR = results_dir("horizon")

RECIPE = "recipes/tiny/config_horizon.yaml"
VARIANTS = {
    "independent": {"model": "data/tiny-qwen3-horizon-independent", "max_steps": 60},
    "chained": {"model": "data/tiny-qwen3-horizon-chained"},
}
"""Variant -> its warm start (data/README.md, "Horizon task family"; made by make_warm_start.py --task
horizon-<variant>) and, where it is not the budget's, its number of training steps. `independent` trains 60 steps
(ours, calibrated on seeds 1001-1004, outside the study's): in 40 its GRPO gains 0.10-0.13, under the issue's
learning bar of 0.15, at every stable learning rate tried, and in 60 it gains +0.154 held-out and +0.170 in
training reward in the mean (data/README.md). Within a variant every arm shares one budget; across variants the
budgets differ, so gains compare within a variant, not between them. `--max-steps` overrides every variant's."""
QUICK_STAND_IN = "data/tiny-qwen3-arith-sol35"
"""The model `--quick` uses for a variant whose warm start does not exist (yet): the arith warm start writes the same
`a op b = r` lines, so it exercises every step of the pipeline, rewards and oracles included; what it measures is the
pipeline, not credit on the horizon task (the report's `config.variants` names the model used)."""
MAIN_K = 4
"""The K the warm starts are calibrated at (student sampled accuracy 0.2-0.6 there)."""

ARMS = {
    **{name: headroom.ARMS[name] for name in ("none", "gear-answer", "gear-solution", "gear-signed", "rlsd")},
    "token": {"credit": "token"},
    "gear_no_entropy": {"credit": "gear_no_entropy"},
    "gear-drop-prefix": {
        "credit": "gear",
        "overrides": ["--teacher_reference", "solution", "--failed_prefix_weight", "0.0"],
    },
    "oracle-gear": headroom.ARMS["oracle-gear"],
    "oracle-strong": headroom.ARMS["oracle-strong"],
    "oracle-prefix": {"credit": "gear", "oracle": "prefix"},
    "oracle-two-sided-0.5": {"credit": "gear", "oracle": "two_sided", "oracle_options": {"eps": 0.5}},
    "oracle-two-sided-0.9": {"credit": "gear", "oracle": "two_sided", "oracle_options": {"eps": 0.9}},
    "oracle-process": {"credit": "gear", "oracle": "process"},
    "oracle-process-local": {"credit": "gear", "oracle": "process_local"},
    "oracle-first-error": {"credit": "gear", "oracle": "first_error"},
    "oracle-prefix-raw": {"credit": "gear", "oracle": "prefix", "oracle_options": {"rescale": False}},
    "oracle-first-error-raw": {"credit": "gear", "oracle": "first_error", "oracle_options": {"rescale": False}},
    "oracle-prefix-keep-close": {"credit": "gear", "oracle": "prefix", "oracle_options": {"keep_close": True}},
    "gear-distill": {
        "credit": "gear",
        "overrides": ["--teacher_reference", "solution", "--distillation_weight", "0.5"],
    },
    "gear-distill-0.25": {
        "credit": "gear",
        "overrides": ["--teacher_reference", "solution", "--distillation_weight", "0.25"],
    },
    "gear-distill-1.0": {
        "credit": "gear",
        "overrides": ["--teacher_reference", "solution", "--distillation_weight", "1.0"],
    },
}
"""Arm -> credit mode, oracle (None: the teacher's KL; `from_error` / `error_token`: bench/headroom.py's label signal
through GEAR's weighting; `prefix`, `two_sided`, `process`: bench/harness/oracles.py's weightings, which replace the
weights or the advantages; each a credit mode registered in the worker process), oracle options and recipe overrides. `gear-drop-prefix` is `gear-solution` with the option
`failed_prefix_weight: 0` (ours), the real-teacher counterpart of `oracle-prefix-raw`: its first onset stands in for
the first wrong token. The new oracles run under `credit: gear` only so that the trainer computes a credit trace to
replace (their teacher pass is wasted, as headroom's oracles' is)."""
DIAGNOSTIC_ARMS = (
    "oracle-process-local",
    "oracle-first-error",
    "oracle-prefix-raw",
    "oracle-first-error-raw",
    "oracle-prefix-keep-close",
)
"""Oracles added after the first runs to find why `oracle-prefix` fell below GRPO (docs/results/horizon.md); not in
the full budget's arms."""
ADDED_ARMS = ("gear-distill", "gear-distill-0.25", "gear-distill-1.0")
"""Real arms added after the first runs, not in the full budget's arms. `gear-distill` is `gear-solution` with the
option `distillation_weight: 0.5` (ours): the loss's advantage (1 - w) * A_t + w * (log pT - log pS) on the sampled
token, SDPO's distillation written as an advantage, the first real arm whose per-token sign can differ from its
rollout's, as `oracle-process`'s does. 0.5, the even blend, was fixed before any run of it (TRL's default 1.0 is
distillation alone, which drops the outcome reward), not tuned. `gear-distill-0.25` and `gear-distill-1.0` are the
same arm at `distillation_weight` 0.25 and 1.0 (TRL's SDPOTrainer default), declared on docs/results/horizon.md before
any run of them, to see how the gain depends on the weight; neither changes a default."""
CEILING = "oracle-prefix"
"""The ceiling of redistribution inside a rollout: `share_of_ceiling` divides by its gain over `none`."""
RAW_CEILING = "oracle-prefix-raw"
"""The same tokens without the mean-1 rescale, the one label oracle found above GRPO (docs/results/horizon.md):
`share_of_raw_ceiling` divides by its gain, beside (never instead of) the issue's `share_of_ceiling`."""
PROCESS_CEILING = "oracle-process"
"""Each decision's own correctness as its advantage, the issue's "ceiling of credit assignment in general" (not a
weighting inside a rollout): `share_of_process_ceiling` divides by its gain, beside the issue's `share_of_ceiling`;
added when it was the one oracle whose interval lay above GRPO's at a K (independent, K = 8)."""
SHARES = {
    "share_of_ceiling": CEILING,
    "share_of_raw_ceiling": RAW_CEILING,
    "share_of_process_ceiling": PROCESS_CEILING,
}

BUDGETS = {
    "full": {
        "variants": list(VARIANTS),
        "ks": [2, 4, 8],
        "arms": [arm for arm in ARMS if arm not in DIAGNOSTIC_ARMS + ADDED_ARMS],
        "seeds": list(range(8)),
        "max_steps": 40,
        "eval_limit": None,
        "problems": 48,
        "set": [],
    },
    "quick": {
        "variants": ["chained"],
        "ks": [2, 4],
        "arms": ["none", CEILING],
        "seeds": [0, 1],
        "max_steps": 2,
        "eval_limit": 8,
        "problems": 2,
        "set": ["per_device_train_batch_size=16"],  # 2 problems x 8 samples per step
    },
}
"""Costs, measured. `--quick` (chained, K 2 and 4, none and oracle-prefix x 2 seeds, 2 steps of 2 problems, 8
held-out problems, 2 probes of 2 problems: 12 jobs) used 12-15 CPU-seconds a job, 160 in all, and took 10.1 minutes
of wall time on 2 cores that 5 other jobs shared (load average 6-8), with `QUICK_STAND_IN` as the model; on 2 idle
cores its CPU time would take about 2 minutes (an estimate, not measured here). Its stand-in scores 0 on these
prompts (it writes one line and a boxed answer), so every group is all-failed and no oracle acts in it: the quick
check runs every step of the pipeline, not the oracles' effect. Rerun with the chained warm start (the committed
`horizon_quick.*`): 191 CPU-seconds in all, 5.7 minutes of wall time with one worker on 2 cores that two training
runs shared, so about 2 minutes with two workers on idle cores (an estimate from the CPU time).

The full budget (2 variants x K 2, 4, 8 x 13 arms x 8 seeds = 624 runs of 40 steps of 8 problems x 8 samples, 60
for `independent` (`VARIANTS`), 200 held-out problems) is far beyond a 2-core session. Estimated from arith's measured 81-97 CPU-seconds a 40-step run
with 48-token completions, scaled by completion length (12 K + 16 tokens at most): about 70, 90 and 180 CPU-seconds a
run at K 2, 4, 8, so 13 arms x 8 seeds x 340 CPU-seconds = 9.8 CPU-hours a variant, about 20 in all, plus 78 probes.
The 6 oracles and `none` (7 arms) at every K of both variants: about 10.6 CPU-hours; of one variant, 5.3. Within
the issue's 8 CPU-hours: the 6 oracle arms and `none` on `chained` at K 2, 4, 8 (5.3 h), then the teacher arms at the
K where the ceiling's interval is above 0. Measured since: a `none` run at K = 4 from the chained warm start costs
178-207 CPU-seconds (docs/results/horizon.md, "Status"), twice the estimate above, so these totals are low; the first
study runs (chained, K = 4: `none`, three oracles and `gear-solution`) cost 170-221 CPU-seconds a run (mean 196, the
teacher pass of the GEAR modes included), and 4 arms x 8 seeds with their probes took 56 minutes on 2 idle cores. Each
variant also needs its warm start first (make_warm_start.py: about 5
CPU-seconds an SFT step of 32 rows measured on `chained`, so 800 steps are about 70 CPU-minutes) and its
calibration runs of `none` on seeds outside the study (1001-1004 were used)."""

METRICS = teacher_sweep.METRICS


def max_completion_length(k: int) -> int:
    """12 tokens a line at most ("23 + 5 = 28\\n" is 10 of the tiny tokenizer's), the empty think block and the end
    token: 12 K + 16."""
    return 12 * k + 16


# ---------------------------------------------------------------------------------------------------------------------
# Statistics (pure)
# ---------------------------------------------------------------------------------------------------------------------


def share_of_ceiling(
    arm: dict[int, float], ceiling: dict[int, float], ceiling_low: float, draws: int = 2000, seed: int = 0
) -> dict | None:
    """The share of the ceiling's gain an arm recovers, paired by seed.

    Args:
        arm: seed -> the arm's paired difference from `none` (a metric's arm - none on that seed).
        ceiling: seed -> the ceiling's (oracle-prefix's) paired difference from `none`.
        ceiling_low: the lower bound of the ceiling's 95% interval; the share is undefined (None) unless it is > 0.

    Returns:
        {"mean": mean(arm) / mean(ceiling) over the seeds both have, "ci_low", "ci_high": the 2.5th and 97.5th
        percentiles of that ratio over `draws` bootstrap resamples of those seeds (resamples whose ceiling mean is
        <= 0 count as a share of -inf / +inf by the arm's sign, so a ceiling that is unsure widens the interval),
        "n_seeds"}; None where the ceiling's interval is not above 0 or fewer than 2 seeds are shared.
    """
    if ceiling_low is None or math.isnan(ceiling_low) or ceiling_low <= 0:
        return None
    return stats.bootstrap_ratio(arm, ceiling, draws=draws, seed=seed)


def paired_by_seed(runs: list[dict], arm: str, metric: str, window: int, baseline: str = "none") -> dict[int, float]:
    """seed -> arm's metric minus the baseline's, over the seeds both have run."""
    mine = {r["seed"]: r for r in runs if r["label"] == arm}
    base = {r["seed"]: r for r in runs if r["label"] == baseline}
    out = {}
    for seed in sorted(set(mine) & set(base)):
        x = teacher_sweep.run_metric(mine[seed], metric, window)
        y = teacher_sweep.run_metric(base[seed], metric, window)
        if x is not None and y is not None:
            out[seed] = x - y
    return out


def steps_after_error(samples: list[dict]) -> dict:
    """What a failed rollout writes after its first wrong decision, over evaluation samples (`gear_trl.evaluate`'s
    `per_sample` rows: `prompt`, `completion`, `reward`).

    Returns {"failed": failed rollouts with a wrong decision, "lines_after": decision lines after the first wrong
    one, "right_steps": how many of those are right steps given the lines before them (`step_correct`: in `chained`,
    right from the wrong carried value), "share": right_steps / lines_after (None without any)}."""
    from gear_trl.rewards.horizon import decision_correct, horizon_problem, step_correct

    failed = lines = right = 0
    for sample in samples:
        problem = horizon_problem(sample.get("prompt"))
        if problem is None or sample.get("reward") == 1.0:
            continue
        decisions = decision_correct(sample.get("completion"), problem.results)
        first = next((k for k, ok in enumerate(decisions) if not ok), None)
        if first is None:
            continue
        failed += 1
        later = step_correct(sample.get("completion"), problem)[first + 1 :]
        lines += len(later)
        right += sum(later)
    return {"failed": failed, "lines_after": lines, "right_steps": right, "share": right / lines if lines else None}


def overrun_share(samples: list[dict], k: int) -> float | None:
    """The share of evaluation samples (`per_sample` rows) that write more than `k` equation lines: a model that no
    longer stops after its K lines (the reward needs exactly K). None without samples."""
    from gear_trl.rewards.horizon import equation_lines
    from gear_trl.rewards.math_rewards import completion_text

    if not samples:
        return None
    return sum(len(equation_lines(completion_text(s.get("completion")) or "")) > k for s in samples) / len(samples)


def add_shares(arms: dict, runs: list[dict], window: int) -> dict:
    """Sets each arm's share of every ceiling in `SHARES` that ran in the cell (`arms`: arm -> its report, `runs`: the
    cell's training runs), metric -> `share_of_ceiling` or None where undefined. Returns `arms`, changed in place."""
    for key, ceiling in SHARES.items():
        if ceiling not in arms:
            continue
        for arm, out in arms.items():
            if arm in ("none", ceiling):
                continue
            out[key] = {
                metric: share_of_ceiling(
                    paired_by_seed(runs, arm, metric, window),
                    paired_by_seed(runs, ceiling, metric, window),
                    arms[ceiling][f"{metric}_minus_none"]["ci_low"],
                )
                for metric in METRICS
            }
    return arms


def cell_report(cell: dict, window: int) -> dict:
    """One variant and K: `cell` = {"arms": [...], "runs": [...], "probes": {arm: probe}, "start": start result}.

    Returns {"start": the warm start's held-out scores, "none_accuracy": {"start", "end", "end_ci_low",
    "end_ci_high"} (held-out sampled accuracy of the warm start, and of `none` after training, mean of its seeds),
    "arms": arm -> bench/headroom.py's cell plus `share_of_ceiling`, `share_of_raw_ceiling` and
    `share_of_process_ceiling` (metric -> share, or None where undefined)}."""
    (body,) = headroom.build_report({"cell": cell}, window).values()
    arms = add_shares(body["arms"], cell["runs"], window)
    none = arms.get("none", {}).get("sampled_accuracy", {})
    body["model"] = (cell.get("start") or {}).get("model")
    body["none_accuracy"] = {
        "start": body["start"].get("sampled_accuracy"),
        "end": none.get("mean"),
        "end_ci_low": none.get("ci_low"),
        "end_ci_high": none.get("ci_high"),
    }
    return body


def build_report(cells: dict, window: int) -> dict:
    """`cells`: variant -> K -> cell (see `cell_report`) -> `variants` -> str(K) -> report."""
    return {
        variant: {str(k): cell_report(cell, cell.get("window", window)) for k, cell in by_k.items()}
        for variant, by_k in cells.items()
    }


# ---------------------------------------------------------------------------------------------------------------------
# Plot and table
# ---------------------------------------------------------------------------------------------------------------------


def plot(report: dict, path: Path) -> list[str]:
    """Per variant (rows) and metric (columns): each arm's paired gain over `none` against K, with its interval.
    Returns the legend's arms, one entry per arm run in any variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = report["variants"]
    fig, axes = plt.subplots(len(variants), len(METRICS), figsize=(12, 4.2 * len(variants)), squeeze=False)
    arms = sorted({a for by_k in variants.values() for body in by_k.values() for a in body["arms"]} - {"none"})
    colors = {arm: plt.get_cmap("tab20")(i % 20) for i, arm in enumerate(arms)}
    for row, (variant, by_k) in enumerate(variants.items()):
        ks = sorted(by_k, key=int)
        for ax, (metric, title) in zip(axes[row], METRICS.items(), strict=True):
            for j, arm in enumerate(arms):
                xs, ys, lows, highs = [], [], [], []
                for k in ks:
                    cell = by_k[k]["arms"].get(arm, {}).get(f"{metric}_minus_none")
                    if cell is None or math.isnan(cell["mean"]):
                        continue
                    offset = 1 + 0.012 * (j - len(arms) / 2)  # side by side on the log axis
                    xs.append(int(k) * offset)
                    ys.append(cell["mean"])
                    lows.append(0.0 if math.isnan(cell["ci_low"]) else cell["mean"] - cell["ci_low"])
                    highs.append(0.0 if math.isnan(cell["ci_high"]) else cell["ci_high"] - cell["mean"])
                if xs:
                    style = "--" if arm.startswith("oracle") else "-"
                    ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o" + style, capsize=3, label=arm, color=colors[arm],
                                ms=4, lw=1)  # fmt: skip
            ax.axhline(0, color="gray", lw=1, ls=":")
            ax.set_xscale("log", base=2)
            ax.set_xticks([int(k) for k in ks], ks)
            if len(ks) == 1:  # one K: keep the arms' side-by-side offsets small around its tick
                ax.set_xlim(int(ks[0]) * 0.8, int(ks[0]) * 1.25)
            ax.set_xlabel("K (decisions per problem)")
            ax.set_ylabel(f"arm - none, {title}", fontsize=8)
            ax.set_title(f"{variant}: {title}, paired by seed, 95% t-interval", fontsize=9)
            ax.grid(alpha=0.3)
    by_label = {}  # every variant's arms: an arm run in one variant only still gets its legend entry
    for row in axes:
        for handle, label in zip(*row[0].get_legend_handles_labels(), strict=True):
            by_label.setdefault(label, handle)
    labels = [arm for arm in arms if arm in by_label]
    handles = [by_label[arm] for arm in labels]
    bottom = 0.0
    if handles:  # room under the axes for every legend row (0.2 in each at fontsize 8), so no row covers a K label
        ncol = min(len(labels), 5)
        fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8)
        bottom = 0.02 + math.ceil(len(labels) / ncol) * 0.2 / fig.get_figheight()
    fig.suptitle(report["title"], fontsize=9)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return labels


def _share(cell: dict | None) -> str:
    if cell is None:
        return "n/a"
    low, high = cell["ci_low"], cell["ci_high"]
    bounds = "" if math.isinf(low) or math.isinf(high) else f" [{low:+.2f}, {high:+.2f}]"
    return f"{cell['mean']:+.2f}{bounds}"


def markdown(report: dict) -> str:
    """Per variant and K: `none`'s start and end, then each arm's gains, share of the ceiling and localization."""
    num = teacher_sweep._num
    lines = []
    for variant, by_k in report["variants"].items():
        for k, body in sorted(by_k.items(), key=lambda item: int(item[0])):
            none = body["none_accuracy"]
            lines += [
                (
                    f"## {variant}, K = {k} (`none`: sampled accuracy {num(none['start'])} at the start, "
                    f"{num(none['end'])} after training)"
                ),
                "",
                (
                    f"Warm start: `{body.get('model')}` (held-out samples with more than K lines: "
                    f"{num((body.get('overrun') or {}).get('start'), 3)})."
                ),
                "",
                (
                    "| arm | seeds | reward - none | sampled acc. - none | share of ceiling (reward) "
                    "| share of ceiling (sampled) | share of raw ceiling (reward) | share of raw ceiling (sampled) "
                    "| share of process ceiling (reward) | share of process ceiling (sampled) "
                    "| onset at error (chance) | first onset by error | blame ratio (random) | mass moved "
                    "| more than K lines (held-out) |"
                ),
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            overrun = body.get("overrun") or {}
            for arm, cell in body["arms"].items():
                per_seed = list((overrun.get("arms") or {}).get(arm, {}).values())
                loc = cell.get("localization") or {}
                diffs = [
                    teacher_sweep._cell(cell[f"{m}_minus_none"]) if f"{m}_minus_none" in cell else "(baseline)"
                    for m in METRICS
                ]
                share_cells = [
                    "(ceiling)" if arm == ceiling else "" if arm == "none" else _share((cell.get(key) or {}).get(m))
                    for key, ceiling in SHARES.items()
                    for m in METRICS
                ]
                lines.append(
                    f"| `{arm}` | {cell['reward_last']['n_seeds']} | {diffs[0]} | {diffs[1]} | "
                    + " | ".join(share_cells)
                    + f" | {num(loc.get('onset_rate'))} ({num(loc.get('onset_rate_random'))}) "
                    f"| {num(loc.get('first_onset_by_error'))} "
                    f"| {num(loc.get('blame_ratio'))} ({num(loc.get('blame_ratio_random'))}) "
                    f"| {num(loc.get('moved_share'), 3)} "
                    f"| {num(sum(per_seed) / len(per_seed) if per_seed else None, 3)} |"
                )
            if body.get("not_run"):
                lines += ["", "Not run at this K: " + ", ".join(f"`{arm}`" for arm in body["not_run"]) + "."]
            lines.append("")
    if report.get("cells_not_run"):
        lines += ["Not run yet (no `none` run): " + ", ".join(report["cells_not_run"]) + ".", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------------------


def steps_title(steps_of: dict[str, int]) -> str:
    """`40 steps`, or per variant where they differ: `independent 60 steps, chained 40 steps`."""
    if len(set(steps_of.values())) <= 1:
        return f"{next(iter(steps_of.values()), 0)} steps"
    return ", ".join(f"{v} {n} steps" for v, n in steps_of.items())


def cell_overrides(variant: str, k: int, model: str, arm: str, budget_overrides: list[str] = ()) -> list[str]:
    """Recipe overrides of `arm`'s runs at (variant, K): the warm start, the dataset and completion length of K, the
    budget's and the arm's own (a later flag wins)."""
    return ["--model_name_or_path", model, "--dataset_name", f"data/horizon/{variant}/k{k}",
            "--max_completion_length", str(max_completion_length(k)), *budget_overrides,
            *ARMS[arm].get("overrides", [])]  # fmt: skip


def restore_runs(report: dict, source: str, jobs: list[dict], log=print) -> int:
    """Writes the training runs that an earlier report (`report`, read from `source`) holds back into the cache, for
    each planned training job in `jobs` with no cached result whose arm, seed and spec the report's run has: a study
    whose work dir was lost (a new machine) goes on from its committed report instead of training those runs again.
    A restored result carries `restored_from` = `source`. The report has no held-out samples, so the figures made
    from them (`overrun`, `steps_after_error`) are carried over from it for restored runs (see `main`). Returns the
    number of runs restored."""
    by_task = report.get("runs", {})
    restored = 0
    for job in jobs:
        if job["kind"] != "train" or headroom.cached(job) is not None:
            continue
        spec = learning.job_spec(job)
        for run in by_task.get(job["task"], []):
            if run.get("label") == job["label"] and run.get("seed") == job["seed"] and run.get("spec") == spec:
                path = Path(job["work_dir"]) / job["key"] / "result.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({**run, "restored_from": source}, indent=1))
                restored += 1
                break
    log(f"restored {restored} training runs from {source}")
    return restored


def extend_report(report: dict, earlier: dict, source: str) -> dict:
    """Adds to `report` what `earlier` (an earlier report of this study, read from `source`) has and `report` does
    not: its cells (variant and K) that `report` did not plan, with their runs, and its arms, variants and budget in
    `config`; records where they came from in `extended_from` (`source`, `earlier`'s git and jobs, the cells kept).
    A cell `report` has replaces `earlier`'s whole. Returns `report`, changed in place."""
    kept, variants = [], {}
    for variant in [*earlier["variants"], *(v for v in report["variants"] if v not in earlier["variants"])]:
        mine, old = report["variants"].get(variant, {}), earlier["variants"].get(variant, {})
        kept += [f"{variant}-k{k}" for k in old if k not in mine]
        variants[variant] = dict(sorted({**old, **mine}.items(), key=lambda item: int(item[0])))
    report["variants"] = variants
    report["runs"] = {
        **{task: runs for task, runs in earlier.get("runs", {}).items() if task in kept},
        **report["runs"],
    }
    for task in kept:  # shares are made from the runs: a kept cell gets those of ceilings added since it was written
        variant, k = task.rsplit("-k", 1)
        window = earlier["config"]["variants"].get(variant, {}).get("window") or earlier["config"]["budget"]["window"]
        add_shares(variants[variant][k]["arms"], report["runs"][task], window)
    report["cells_not_run"] = [
        *(c for c in earlier.get("cells_not_run", []) if c not in report["runs"]),
        *(c for c in report["cells_not_run"] if c not in kept),
    ]
    config, old_config = report["config"], earlier["config"]
    config["arms"] = {**old_config["arms"], **config["arms"]}
    config["variants"] = {**old_config["variants"], **config["variants"]}
    budget, old_budget = config["budget"], old_config["budget"]
    for key in ("variants", "ks", "arms", "seeds"):
        budget[key] = [*old_budget[key], *(item for item in budget[key] if item not in old_budget[key])]
    report["extended_from"] = {
        "path": source, "git": earlier.get("git"), "jobs": earlier.get("jobs"), "cells_kept": kept,
    }  # fmt: skip
    return report


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="chained, K 2 and 4: none, oracle-prefix x 2 seeds.")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS))
    parser.add_argument("--ks", nargs="+", type=int)
    parser.add_argument("--arms", nargs="+", choices=sorted(ARMS))
    parser.add_argument("--seeds", nargs="+", type=int)
    parser.add_argument("--max-steps", type=int)
    parser.add_argument("--model", action="append", default=[], metavar="VARIANT=DIR",
                        help="Another warm start for a variant (calibration); repeatable.")  # fmt: skip
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="A recipe override for every training run (learning_rate=1e-3, say: calibration); "
                        "repeatable, recorded in the report's budget.")  # fmt: skip
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work-dir", help="Default: outputs/horizon[_quick].")
    parser.add_argument("--out-dir", default=str(RESULTS_DIR))
    parser.add_argument("--fresh", action="store_true", help="Ignore cached runs.")
    parser.add_argument("--report-only", metavar="JSON", help="Rewrite the .md and .png beside a committed report of "
                        "this study (bench/results/horizon/...) from its JSON (no training) and stop.")  # fmt: skip
    parser.add_argument("--no-png", action="store_true", help="With --report-only: the .md only.")
    parser.add_argument("--extend", metavar="JSON",
                        help="An earlier report of this study (bench/results/horizon/horizon.json): its training runs that "
                        "this invocation plans are restored into the cache, not trained again, and its cells that "
                        "this invocation does not plan are kept as they are, so a study grows one cell or arm at a "
                        "time.")  # fmt: skip
    parser.add_argument("--cached-only", action="store_true",
                        help="Train nothing: report the runs already cached (as horizon[_quick]_partial.* while any "
                        "is missing).")  # fmt: skip
    return parser


def main(argv: list[str] | None = None, log=print) -> dict:
    import yaml

    parser = make_parser()
    args = parser.parse_args(argv)
    if args.report_only:
        return reports.rewrite_from_json(Path(args.report_only), plot, markdown, png=not args.no_png, log=log)
    name = "horizon" + ("_quick" if args.quick else "")
    budget = dict(BUDGETS["quick" if args.quick else "full"])
    variants = args.variants or budget["variants"]
    ks = args.ks or budget["ks"]
    arms = ["none", *(a for a in (args.arms or budget["arms"]) if a != "none")]
    seeds = args.seeds or budget["seeds"]
    max_steps = args.max_steps or budget["max_steps"]
    steps_of = {  # the quick check and an explicit --max-steps hold for every variant
        v: max_steps if args.max_steps or args.quick else VARIANTS[v].get("max_steps", max_steps) for v in variants
    }
    models = {v: spec["model"] for v, spec in VARIANTS.items()}
    for item in args.model:
        variant, sep, model = item.partition("=")
        if not sep or variant not in VARIANTS:
            parser.error(f"--model takes VARIANT=DIR with VARIANT one of {sorted(VARIANTS)}; got {item!r}")
        models[variant] = model
    for variant in variants:
        exists = (REPO_ROOT / models[variant] / "model.safetensors").exists()
        if not exists and args.quick and models[variant] == VARIANTS[variant]["model"]:
            log(f"{variant}: no warm start at {models[variant]}; the quick check uses {QUICK_STAND_IN}")
            models[variant] = QUICK_STAND_IN
        elif not exists:
            parser.error(
                f"the {variant} warm start {models[variant]} does not exist: make it with `python "
                f'data/scripts/make_warm_start.py --task horizon-{variant}` (data/README.md, "Horizon task family") '
                "or name another with --model VARIANT=DIR"
            )
    if min(ks) < 1:
        parser.error("every K must be at least 1")
    earlier = None
    if args.extend:  # read before anything runs: a wrong path fails here, not after the training
        try:
            earlier = json.loads(Path(args.extend).read_text())
        except (OSError, ValueError) as error:
            parser.error(f"--extend {args.extend}: cannot read it as a JSON report ({error})")
        missing = [key for key in ("variants", "runs", "config") if key not in earlier]
        if missing:
            parser.error(f"--extend {args.extend}: not a horizon report (no {', '.join(missing)})")
    for item in args.set:
        if not item.partition("=")[0] or "=" not in item:
            parser.error(f"--set takes KEY=VALUE; got {item!r}")
    budget["set"] = [*budget["set"], *args.set]
    work_root = Path(args.work_dir or REPO_ROOT / "outputs" / name)
    overrides = [arg for item in budget["set"] for arg in (f"--{item.partition('=')[0]}", item.partition("=")[2])]
    recipe = yaml.safe_load((REPO_ROOT / RECIPE).read_text())
    recipe_sha = learning.recipe_values_sha(recipe)
    wall = time.perf_counter()

    planned, plan = [], {}
    for variant in variants:
        for k in ks:
            evaluation = {"dataset": f"data/horizon/{variant}/k{k}", "split": "test", "dataset_format": "generic",
                          "max_new_tokens": max_completion_length(k), "reward": "horizon_accuracy"}  # fmt: skip
            common = {
                "recipe": RECIPE,
                "eval": evaluation,
                "eval_limit": budget["eval_limit"],
                "train_eval": None,
                "temperature": float(recipe.get("temperature", 1.0)),
                "recipe_sha": recipe_sha,
                "error_site": "horizon",
                # keyed on the weights: a remade warm start is never mixed with old runs
                "work_dir": str(work_root / f"{variant}-k{k}-{jobs.sha_of(models[variant])}"),
                "task": f"{variant}-k{k}",
            }
            start = {"kind": "start", "key": "start", "model": models[variant], **common}
            cell = {"start": start, "arms": arms, "probes": {}, "train": []}
            for arm in arms:
                spec = ARMS[arm]
                if spec["credit"] != "none":
                    cell["probes"][arm] = {
                        "kind": "probe", "key": f"probe__{learning.run_key(arm, 0)}", "mode": spec["credit"],
                        "oracle": spec.get("oracle"), "oracle_options": spec.get("oracle_options"),
                        "overrides": cell_overrides(variant, k, models[variant], arm),
                        "problems": budget["problems"], **common,
                    }  # fmt: skip
            for seed in seeds:  # seed-major: a cut-off study has every arm's first seeds
                for arm in arms:
                    spec = ARMS[arm]
                    cell["train"].append({
                        "kind": "train", "key": learning.run_key(arm, seed), "label": arm, "mode": spec["credit"],
                        "oracle": spec.get("oracle"), "oracle_options": spec.get("oracle_options"), "seed": seed,
                        "max_steps": steps_of[variant],
                        "overrides": cell_overrides(variant, k, models[variant], arm, overrides), **common,
                    })  # fmt: skip
            plan[(variant, k)] = cell
            planned += [start, *cell["probes"].values(), *cell["train"]]

    if earlier is not None and not args.fresh:
        restore_runs(earlier, args.extend, planned, log)
    results = jobs.run_jobs(
        planned, args.workers, args.fresh, log, cached_only=args.cached_only, dispatch=headroom.dispatch,
        cached=headroom.cached,
    )  # fmt: skip

    def got(job):
        return results.get((job["work_dir"], job["key"]))

    cells_not_run = []
    if args.cached_only:  # report, per variant and K, the arms run there: an arm with no cached run is `not_run`
        for variant, k in list(plan):  # a (variant, K) where no `none` run is cached has nothing to compare with
            if not any(got(job) is not None for job in plan[variant, k]["train"] if job["label"] == "none"):
                cells_not_run.append(f"{variant}-k{k}")
                del plan[variant, k]
        if cells_not_run:
            log(f"no cached `none` run at {', '.join(cells_not_run)}: left out of the report (`cells_not_run`)")
        for cell in plan.values():
            ran = {"none"} | {job["label"] for job in cell["train"] if got(job) is not None}
            cell["not_run"] = [arm for arm in cell["arms"] if arm not in ran]
            cell["arms"] = [arm for arm in cell["arms"] if arm in ran]
            cell["probes"] = {arm: job for arm, job in cell["probes"].items() if arm in ran}
            cell["train"] = [job for job in cell["train"] if job["label"] in ran]
        planned = [job for cell in plan.values() for job in (cell["start"], *cell["probes"].values(), *cell["train"])]
    missing = sum(got(job) is None for job in planned)
    if missing:
        name += "_partial"
    window = learning.final_window(max_steps)
    cells: dict = {}
    for (variant, k), cell in plan.items():
        cells.setdefault(variant, {})[k] = {
            "arms": cell["arms"],
            "window": learning.final_window(steps_of[variant]),
            "start": got(cell["start"]),
            "probes": {arm: got(job) for arm, job in cell["probes"].items() if got(job) is not None},
            "runs": [got(job) for job in cell["train"] if got(job) is not None],
        }
    title_steps = {  # an extended report's title names the steps of the variants it keeps too
        **{v: spec["max_steps"] for v, spec in (earlier or {}).get("config", {}).get("variants", {}).items()},
        **steps_of,
    }
    report = {
        "title": f"Horizon: each arm against GRPO, paired by seed ({steps_title(title_steps)}, seeds {seeds}"
        + (", quick" if args.quick else "")
        + (f"; partial: {len(planned) - missing} of {len(planned)} jobs done)" if missing else ")"),
        "config": {
            "arms": {arm: ARMS[arm] for arm in arms},
            "variants": {
                v: {"model": models[v], "max_steps": steps_of[v], "window": learning.final_window(steps_of[v])}
                for v in variants
            },
            "budget": {
                **budget,
                "variants": variants,
                "ks": ks,
                "arms": arms,
                "seeds": seeds,
                "max_steps": max_steps,
                "window": window,
            },
            "recipe": RECIPE,
            "ceiling": CEILING,
            "main_k": MAIN_K,
        },
        **reports.provenance(wall),
        "jobs": {"planned": len(planned), "missing": missing},
        "cells_not_run": cells_not_run,
        "variants": build_report(cells, window),
        "runs": {f"{v}-k{k}": cell["runs"] for v, by_k in cells.items() for k, cell in by_k.items()},
    }
    for (variant, k), cell in plan.items():
        if cell.get("not_run"):
            report["variants"][variant][str(k)]["not_run"] = cell["not_run"]

    def samples(job):  # a run's held-out samples (its sampled.json in the work dir), read once per job
        path = Path(job["work_dir"]) / job["key"] / "sampled.json"
        return json.loads(path.read_text())["per_sample"] if path.exists() else []

    for (variant, k), cell in plan.items():
        body = report["variants"][variant][str(k)]
        start, by_job = samples(cell["start"]), [(job, samples(job)) for job in cell["train"]]
        # a run restored from the earlier report (`--extend`) has no samples here: its figures are that report's
        old = (earlier or {}).get("variants", {}).get(variant, {}).get(str(k)) or {}
        restored = {(job["label"], job["seed"]) for job in cell["train"] if (got(job) or {}).get("restored_from")}
        none_seeds = {job["seed"] for job in cell["train"] if job["label"] == "none"}
        # what failed rollouts write after their first error: the warm start's held-out samples, and those of every
        # `none` run after training, pooled (the earlier report's pool where every `none` run is restored; unknown
        # where only some are)
        none_end = steps_after_error([row for job, rows in by_job if job["label"] == "none" for row in rows])
        if any(("none", seed) in restored for seed in none_seeds):
            full = all(("none", seed) in restored for seed in none_seeds)
            none_end = (old.get("steps_after_error") or {}).get("none_end") if full else None
        body["steps_after_error"] = {"start": steps_after_error(start), "none_end": none_end}
        # how many held-out samples run past their K lines: the warm start's, and each arm's per seed
        body["overrun"] = {"start": overrun_share(start, k), "arms": {}}
        for job, rows in by_job:
            share = overrun_share(rows, k)
            if (job["label"], job["seed"]) in restored:
                share = (old.get("overrun") or {}).get("arms", {}).get(job["label"], {}).get(str(job["seed"]))
            if share is not None:
                body["overrun"]["arms"].setdefault(job["label"], {})[str(job["seed"])] = share
    if earlier is not None:
        extend_report(report, earlier, args.extend)
    out_dir = Path(args.out_dir)
    reports.write_results(report, out_dir, name, plot, markdown, log)
    log(f"wrote {out_dir / (name + '.json')}, .png and .md in {report['wall_s_this_invocation'] / 60:.1f} min")
    return report


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
