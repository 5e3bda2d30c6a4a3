"""Whose gain is it? The credit-methods study (issue 51), as declared in bench/results/credit_methods/declaration.md
before any of its runs: GRPO, GRPO + self-distillation, GEAR + self-distillation, GEAR, TRL's SDPOTrainer as it ships,
RLSD with its reference schedule and the process ceiling, on four cells, paired by seed, Holm-corrected.

    python -m bench.credit_methods --cell independent-k8                 # the declared confirmatory runs of a cell
    python -m bench.credit_methods --cell independent-k8 --arms none gear --seeds 0 1   # exploration (seeds 0-47)
    python -m bench.credit_methods --report-only                         # the report from the committed runs
    python -m bench.credit_methods --check-declaration                   # the declaration came before the runs

Every finished run's result is committed under `runs/<cell>/<arm>__seed<N>.json` in the results folder: the study's
cache across sessions (a machine's work dir does not survive it), read back whenever its spec still holds. The report
(`credit_methods.json`) holds only confirmatory seeds; exploration runs go to `credit_methods_exploration.json`.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import textwrap
import time
from pathlib import Path

from bench.harness import REPO_ROOT, index, jobs, reports, results_dir, runs, stats
from bench.horizon import max_completion_length
from bench.learning import TASKS as LEARNING_TASKS

RESULTS = results_dir("credit_methods")
RUNS_DIR = RESULTS / "runs"
DECLARATION = json.loads((RESULTS / "declaration.json").read_text())
CONFIRMATORY = DECLARATION["confirmatory_seeds"]
EXPLORATION = range(DECLARATION["exploration_seeds"][0], DECLARATION["exploration_seeds"][1] + 1)
ITEM6 = DECLARATION["item6"]
ITEM6_SEEDS = ITEM6["seeds"]
"""Amendment 2: item 6's setting confirmed on its own fresh seeds, cells and arms, with its own Holm family C."""
WINDOW = 15
"""The final window of training reward, in logged steps (the declaration's)."""
HORIZON_RECIPE = "recipes/tiny/config_horizon.yaml"
TOOLS_RECIPE = "recipes/tiny/config_calc_tools.yaml"


def _horizon_cell(variant: str, k: int, model: str, max_steps: int) -> dict:
    return {
        "recipe": HORIZON_RECIPE,
        "max_steps": max_steps,
        "base": [
            "--model_name_or_path",
            model,
            "--dataset_name",
            f"data/horizon/{variant}/k{k}",
            "--max_completion_length",
            str(max_completion_length(k)),
        ],
        "reference": ["--teacher_reference", "solution"],
        "eval": {
            "dataset": f"data/horizon/{variant}/k{k}",
            "split": "test",
            "dataset_format": "generic",
            "max_new_tokens": max_completion_length(k),
            "reward": "horizon_accuracy",
        },
        "error_site": "horizon",
    }


CELLS = {
    "independent-k8": _horizon_cell("independent", 8, "data/tiny-qwen3-horizon-independent", 60),
    "independent-k4": _horizon_cell("independent", 4, "data/tiny-qwen3-horizon-independent", 60),
    "chained-k4": _horizon_cell("chained", 4, "data/tiny-qwen3-horizon-chained", 40),
    "calculator": {
        "recipe": TOOLS_RECIPE,
        "max_steps": 60,
        "base": [],
        "reference": [],  # the task's reference calls, the tool template's whole worked sequence (declaration)
        "eval": LEARNING_TASKS["tools"]["eval"],
        "error_site": "tools",
    },
}
"""Cell -> its recipe, step budget (bench/horizon.py `VARIANTS` and `BUDGETS["full"]`, bench/learning.py's tools
task), recipe overrides, the teacher's reference, and the held-out split."""

ARMS = {
    "none": {"credit": "none"},
    "grpo-distill-0.25": {"credit": "none", "reference": True, "set": ["--distillation_weight", "0.25"]},
    "grpo-distill-0.5": {"credit": "none", "reference": True, "set": ["--distillation_weight", "0.5"]},
    "gear-distill-0.25": {"credit": "gear", "reference": True, "set": ["--distillation_weight", "0.25"]},
    "gear-distill-0.5": {"credit": "gear", "reference": True, "set": ["--distillation_weight", "0.5"]},
    "gear": {"credit": "gear", "reference": True},
    # amendment 3: in independent-k8 only (the warm starts cannot read SDPO's reprompt: bench/sdpo_teacher.py)
    "sdpo-trl": {"credit": "none", "sdpo": {"privileged_context": "none"}, "cells": ["independent-k8"]},
    "sdpo-trl-solution": {"credit": "none", "sdpo": {"privileged_context": "solution"}, "cells": ["independent-k8"]},
    # issue 73 item 3, the fair SDPO arm (not in the declared families; item 4's study runs it): TRL's SDPOTrainer
    # with GEAR's teacher wording as its reprompt (bench/harness/sdpo.py `GEAR_WORDING`) and the reward gradient kept
    "sdpo-trl-fair-0.5": {"credit": "none", "reference": True, "explore": True, "cells": ["independent-k8"],
                          "sdpo": {"privileged_context": "gear-solution", "distillation_weight": 0.5}},
    "rlsd-reference": {
        "credit": "rlsd",
        "reference": True,
        "set": [
            "--teacher",
            "periodic",
            "--teacher_sync_steps",
            "20",
            "--rlsd_lambda",
            "0.5",
            "--rlsd_lambda_decay_steps",
            "60",
        ],
    },
    "oracle-process": {"credit": "gear", "oracle": "process", "horizon_only": True},
    # Item 6's candidates, tried on exploration seeds (never in families A and B): `distillation_signal: agreement`
    # on GRPO; amendment 2 confirms grpo-agree-0.5 on its own seeds 200-215 (family C)
    "grpo-agree-0.5": {"credit": "none", "reference": True, "explore": True,
                       "set": ["--distillation_weight", "0.5", "--distillation_signal", "agreement"]},
    "grpo-agree-1.0": {"credit": "none", "reference": True, "explore": True,
                       "set": ["--distillation_weight", "1.0", "--distillation_signal", "agreement"]},
    "gigpo": {"credit": "gigpo", "tools_only": True},
    "gear-gigpo": {"credit": "gear-gigpo", "tools_only": True},
}
"""Arm -> credit mode, whether the teacher sees the cell's reference, its own settings; `sdpo` arms train with TRL's
SDPOTrainer (bench/harness/sdpo.py), `oracle` arms under a label oracle (bench/harness/oracles.py); `explore` arms
are issue 51 item 6's candidates, run on exploration seeds only and never part of the declared families."""

IMPORTABLE = {"none": "none", "oracle-process": "oracle-process", "gear": "gear-solution",
              "gear-distill-0.25": "gear-distill-0.25", "gear-distill-0.5": "gear-distill"}  # fmt: skip
"""Arm -> its label in the horizon study's reports (`HORIZON_REPORTS`), whose runs on exploration seeds have this study's
exact inputs (same `runs.job_spec`): an exploration run of this study is read from there rather than trained again.
Checked before relying on it: `none` seed 0 of `independent-k8` trained again here gave the committed run's rewards
and held-out figures exactly (the runs are deterministic on CPU)."""
HORIZON_RUNS = results_dir("horizon") / "horizon.json"
HORIZON_REPORTS = (HORIZON_RUNS, *sorted(results_dir("horizon").glob("replication_*/horizon.json")))
"""The horizon study's report and its replications (disjoint seeds: 0-7, then 8-15, 16-31, 32-47)."""

ATTRIBUTION = {"0.25": ("gear-distill-0.25", "grpo-distill-0.25"), "0.5": ("gear-distill-0.5", "grpo-distill-0.5")}
"""Family B: GEAR + distillation minus GRPO + distillation at the same weight."""
CEILING = "oracle-process"
METRICS = {"heldout": "held-out sampled accuracy at the end", "reward": f"training reward, last {WINDOW} steps"}


def arms_of(cell: str) -> list[str]:
    """The arms the declaration runs in `cell`."""
    tools = cell == "calculator"
    return [a for a, spec in ARMS.items() if not (spec.get("tools_only") and not tools)
            and not (spec.get("horizon_only") and tools) and not spec.get("explore")
            and cell in spec.get("cells", [cell])]  # fmt: skip


def job_for(cell: str, arm: str, seed: int, work_root: Path, arms: dict | None = None) -> dict:
    """The `train` job of (cell, arm, seed); `arms` is the arm table (default: this study's `ARMS`; another study over
    these cells, bench/distill_bounds.py, passes its own)."""
    spec, c = (arms or ARMS)[arm], CELLS[cell]
    overrides = [*c["base"], *(c["reference"] if spec.get("reference") else []), *spec.get("set", [])]
    return {
        "kind": "train", "key": runs.run_key(arm, seed), "label": arm, "cell": cell, "mode": spec["credit"],
        "oracle": spec.get("oracle"), "oracle_options": None, "error_site": c["error_site"],
        "sdpo": spec.get("sdpo"), "seed": seed, "max_steps": c["max_steps"], "overrides": overrides,
        "recipe": c["recipe"], "recipe_sha": runs.recipe_values_sha(_recipe(c["recipe"])), "eval": c["eval"],
        "eval_limit": None, "train_eval": None, "temperature": float(_recipe(c["recipe"]).get("temperature", 1.0)),
        "work_dir": str(work_root / cell),
    }  # fmt: skip


def _recipe(path: str) -> dict:
    import yaml

    return yaml.safe_load((REPO_ROOT / path).read_text())


def spec_of(job: dict) -> dict:
    """What a kept result must have been made with: the harness's spec plus the SDPO settings and the oracle."""
    return {**runs.job_spec(job), "sdpo": job.get("sdpo"), "oracle": job.get("oracle")}


def kept_path(job: dict) -> Path:
    """Where a run's result is kept: `runs/<cell>/<arm>__seed<N>.json` under this study's folder, or under the job's
    own `runs_dir` (a study reusing this harness; not part of the run's spec)."""
    return Path(job.get("runs_dir") or RUNS_DIR) / job["cell"] / f"{job['key']}.json"


def cached(job: dict) -> dict | None:
    """The committed result of `job`, if its spec still holds, or (exploration seeds) the horizon study's run with the
    same inputs (`IMPORTABLE`), kept here with where it came from."""
    path = kept_path(job)
    if path.exists():
        result = json.loads(path.read_text())
        if result.get("spec") == spec_of(job):
            return result
    if job["seed"] not in EXPLORATION or job["label"] not in IMPORTABLE:
        return None
    label = IMPORTABLE[job["label"]]
    for report in HORIZON_REPORTS:
        for run in json.loads(report.read_text())["runs"].get(job["cell"], []):
            if run["label"] == label and run["seed"] == job["seed"] and run["spec"] == runs.job_spec(job):
                keep = {k: run[k] for k in ("mode", "seed", "steps", "train_s", "eval", "eval_s", "reward") if k in run}
                source = report.relative_to(REPO_ROOT).as_posix()
                keep.update(label=job["label"], spec=spec_of(job), cell=job["cell"],
                            imported_from=f"{source} ({job['cell']}, {label}, seed {run['seed']})")  # fmt: skip
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(keep, indent=1) + "\n")
                return keep
    return None


def dispatch(job: dict) -> dict:
    """Train and score one run (in its worker process) and keep its result in the results folder at once, so a
    session that ends mid-study loses no finished run."""
    if job.get("sdpo"):
        from bench.harness.sdpo import train_sdpo

        result = train_sdpo(job)
    else:
        result = runs.train_one(job)
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    keep = {k: result[k] for k in ("label", "mode", "seed", "steps", "train_s", "eval", "eval_s") if k in result}
    keep.update(spec=spec_of(job), cell=job["cell"], reward=result["reward"],
                distill_share=result.get("distill_share"), weight_std=result.get("weight_std"),
                cpu_s=round(usage.ru_utime + usage.ru_stime, 1))  # fmt: skip
    # issue 73's collapse block: the policy's entropy (every GEARTrainer run logs it) and the collapse monitor's
    # weight in force and warnings (runs with distillation_weight), per logged step
    for name in ("entropy", "distill_weight", "collapse_warning"):
        if any(v is not None for v in result.get(name) or []):
            keep[name] = result[name]
    if job.get("sdpo"):  # SDPO's own diagnostics, per logged step (issue 73: kept in the run file)
        from bench.harness.sdpo import SDPO_KEPT

        keep["sdpo_series"] = {name: result.get(name) for name in SDPO_KEPT}
    path = kept_path(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(keep, indent=1) + "\n")
    return keep


# ---------------------------------------------------------------------------------------------------------------------
# Statistics (pure)
# ---------------------------------------------------------------------------------------------------------------------


def metric(run: dict, name: str) -> float:
    """A run's `heldout` (sampled accuracy) or `reward` (mean of the last `WINDOW` logged rewards)."""
    if name == "heldout":
        value = (run.get("eval") or {}).get("sampled_accuracy")
        return math.nan if value is None else value
    rewards = [r for r in run["reward"][-WINDOW:] if r is not None]
    return sum(rewards) / len(rewards) if rewards else math.nan


def paired(runs_: list[dict], arm: str, baseline: str, name: str, seeds) -> dict[int, float]:
    """seed -> `arm`'s metric minus `baseline`'s, on the given seeds both ran."""
    mine = {r["seed"]: r for r in runs_ if r["label"] == arm and r["seed"] in seeds}
    base = {r["seed"]: r for r in runs_ if r["label"] == baseline and r["seed"] in seeds}
    return {s: metric(mine[s], name) - metric(base[s], name) for s in sorted(set(mine) & set(base))}


def compare(runs_: list[dict], arm: str, baseline: str, name: str, seeds) -> tuple[dict, dict[int, float]]:
    """`arm` minus `baseline` on metric `name`, paired by seed: {mean, ci_low, ci_high, n_seeds, p} and the per-seed
    differences."""
    diffs = paired(runs_, arm, baseline, name, seeds)
    interval = stats.paired_interval(list(diffs.values()))
    record = {k: interval[k] for k in ("mean", "ci_low", "ci_high", "n_seeds")}
    record["p"] = stats.t_p_value(list(diffs.values()))
    return record, diffs


OPENING = 5
"""Steps averaged for a training series' start in `dynamics` (its end is the final window, `WINDOW`)."""
DYNAMICS_ARMS = ("none", "grpo-distill-0.25", "grpo-distill-0.5", "gear-distill-0.25", "gear-distill-0.5")


def _mean(values) -> float | None:
    """The mean of the values that are numbers (None and NaN skipped); None when there are none."""
    kept = [v for v in values if v is not None and not math.isnan(v)]
    return sum(kept) / len(kept) if kept else None


def dynamics(runs_: list[dict], seeds) -> dict:
    """Descriptive, not a declared comparison: per arm of `DYNAMICS_ARMS` that ran, the seed mean of its held-out
    sampled accuracy and of each training series (`reward`, `distill_share`) over its first `OPENING` and its last
    `WINDOW` logged steps: {arm: {"heldout": x, "reward": {"first", "last"}, "distill_share": {"first", "last"}}}.
    A step logged as None is skipped; a series a run lacks (GRPO logs no distill share) is None."""
    out: dict = {}
    for arm in DYNAMICS_ARMS:
        mine = [r for r in runs_ if r["label"] == arm and r["seed"] in seeds]
        if not mine:
            continue
        entry = out.setdefault(arm, {"heldout": _mean(metric(r, "heldout") for r in mine), "n_seeds": len(mine)})
        for series in ("reward", "distill_share"):
            entry[series] = {
                "first": _mean(_mean((r.get(series) or [])[:OPENING]) for r in mine),
                "last": _mean(_mean((r.get(series) or [])[-WINDOW:]) for r in mine),
            }
    return out


def summarize(
    runs_by_cell: dict[str, list[dict]], seeds, family_size: int | None = None, explore: bool = False
) -> dict:
    """The report's `cells`: per cell, per arm and metric, `minus_none` {mean, ci_low, ci_high, p, p_holm, n_seeds}
    and `share_of_process_ceiling`; per cell `attribution` (family B) likewise. Holm runs over every comparison of
    families A and B together, per metric (`family_size`: the declared count, so a comparison that could not be made
    still counts). With `explore`, the exploration arms that ran are reported too (never in a confirmatory report)."""
    cells: dict = {}
    tests: dict[str, list[tuple[dict, float]]] = {name: [] for name in METRICS}
    for cell, cell_runs in runs_by_cell.items():
        out = cells.setdefault(cell, {"arms": {}, "attribution": {}})
        ceiling = {name: paired(cell_runs, CEILING, "none", name, seeds) for name in METRICS}
        ran = {r["label"] for r in cell_runs}
        extra = [a for a, spec in ARMS.items() if explore and spec.get("explore") and a in ran]
        for arm in [*arms_of(cell), *extra]:
            if arm == "none" or (explore and arm not in ran):  # an exploration report shows what ran
                continue
            entry = out["arms"].setdefault(arm, {})
            for name in METRICS:
                record, diffs = compare(cell_runs, arm, "none", name, seeds)
                entry[name] = {"minus_none": record}
                if arm != CEILING:
                    tests[name].append((record, record["p"]))
                ceiling_interval = stats.paired_interval(list(ceiling[name].values()))
                share = None
                if arm != CEILING and ceiling_interval["n_seeds"] >= 2 and ceiling_interval["ci_low"] > 0:
                    share = stats.bootstrap_ratio(diffs, ceiling[name])
                entry[name]["share_of_process_ceiling"] = share
        for weight, (gear_arm, grpo_arm) in ATTRIBUTION.items():
            if explore and not {gear_arm, grpo_arm} <= ran:
                continue
            entry = out["attribution"].setdefault(
                f"distillation_weight={weight}", {"arm": gear_arm, "minus": grpo_arm}
            )
            for name in METRICS:
                record, _ = compare(cell_runs, gear_arm, grpo_arm, name, seeds)
                entry[name] = record
                tests[name].append((record, record["p"]))
    for name, family in tests.items():
        adjusted = stats.holm([p for _, p in family], m=max(family_size or 0, len(family)))
        for (record, _), p_holm in zip(family, adjusted, strict=True):
            record["p_holm"] = p_holm
    return cells


def markdown(report: dict) -> str:
    """The first screen: per cell and arm, the paired difference from GRPO on held-out accuracy and final-window
    reward with the 95% interval, the Holm-adjusted p, and the share of the process ceiling."""

    def cell_text(record: dict) -> str:
        if not record or record.get("n_seeds", 0) == 0:
            return "-"
        return (f"{record['mean']:+.3f} [{record['ci_low']:+.3f}, {record['ci_high']:+.3f}] "
                f"p_holm {record.get('p_holm', math.nan):.3f} (n {record['n_seeds']})")  # fmt: skip

    lines = [f"# {report['title']}", "", "| cell | arm | held-out - GRPO | reward - GRPO | share of process ceiling |",
             "|---|---|---|---|---|"]  # fmt: skip
    for cell, data in report["cells"].items():
        for arm, entry in data["arms"].items():
            share = entry["heldout"].get("share_of_process_ceiling")
            share_text = "-" if not share else f"{share['mean']:.2f} [{share['ci_low']:.2f}, {share['ci_high']:.2f}]"
            lines.append(f"| {cell} | {arm} | {cell_text(entry['heldout']['minus_none'])} | "
                         f"{cell_text(entry['reward']['minus_none'])} | {share_text} |")  # fmt: skip
        for entry in data["attribution"].values():
            lines.append(f"| {cell} | {entry['arm']} - {entry['minus']} | {cell_text(entry['heldout'])} | "
                         f"{cell_text(entry['reward'])} | |")  # fmt: skip
    for cell, arms in report.get("followup", {}).items():  # amendment 5's family D, Holm within it
        for arm, entry in arms.items():
            lines.append(f"| {cell} | {arm} - {entry['minus']} (family D) | {cell_text(entry['heldout'])} | "
                         f"{cell_text(entry['reward'])} | |")  # fmt: skip
    for cell, runs_in in report.get("cells_pending", {}).items():
        lines.append(f"| {cell} | under way: {runs_in} of {report['runs_declared'][cell]} declared runs in, "
                     "none read | | | |")  # fmt: skip
    return "\n".join(lines) + "\n"


def summarize_item6(runs_by_cell: dict[str, list[dict]]) -> dict:
    """Amendment 2's report: per complete cell, `grpo-agree-0.5`, `grpo-distill-0.5` and `oracle-process` minus
    `none` (`minus_none`, with the setting's share of the process ceiling), and `grpo-agree-0.5 - grpo-distill-0.5`;
    Holm over family C (the two declared comparisons per cell, 6 in all), per metric."""
    setting, control = ITEM6["setting"]["arm"], "grpo-distill-0.5"
    cells: dict = {}
    tests: dict[str, list[dict]] = {name: [] for name in METRICS}
    seeds = set(ITEM6_SEEDS)
    for cell, cell_runs in runs_by_cell.items():
        out = cells.setdefault(cell, {"arms": {}, "attribution": {}})
        ceiling = {name: paired(cell_runs, CEILING, "none", name, seeds) for name in METRICS}
        for arm in (setting, control, CEILING):
            entry = out["arms"].setdefault(arm, {})
            for name in METRICS:
                record, diffs = compare(cell_runs, arm, "none", name, seeds)
                entry[name] = {"minus_none": record, "share_of_process_ceiling": None}
                if arm == setting:
                    tests[name].append(record)
                ceiling_interval = stats.paired_interval(list(ceiling[name].values()))
                if arm != CEILING and ceiling_interval["n_seeds"] >= 2 and ceiling_interval["ci_low"] > 0:
                    entry[name]["share_of_process_ceiling"] = stats.bootstrap_ratio(diffs, ceiling[name])
        entry = out["attribution"].setdefault("distillation_signal", {"arm": setting, "minus": control})
        for name in METRICS:
            record, _ = compare(cell_runs, setting, control, name, seeds)
            entry[name] = record
            tests[name].append(record)
    declared = 2 * len(ITEM6["cells"])
    for family in tests.values():
        for record, p_holm in zip(family, stats.holm([r["p"] for r in family], m=declared), strict=True):
            record["p_holm"] = p_holm
    for cell, out in cells.items():  # reaches 80% of the ceiling (the amendment's definition)
        entry = out["arms"][setting]["heldout"]
        share = entry["share_of_process_ceiling"]
        out["reaches_80"] = bool(share and share["mean"] >= 0.8 and entry["minus_none"]["p_holm"] < 0.05)
    return cells


FIELD_ARMS = ("sdpo-trl", "sdpo-trl-solution", "rlsd-reference")
"""Outcome 4's field implementations (amendment 5: family D, each minus the recommended arm)."""


def _holds_above(record: dict) -> bool:
    """The declaration's "holds (> 0)": Holm-adjusted p < 0.05 with the mean above 0."""
    return record.get("p_holm", 1.0) < 0.05 and record["mean"] > 0


def recommendation(cells: dict) -> dict:
    """The declared outcomes 1-3 from every cell's report (`summarize`), with amendment 5's choice of weight:
    {outcome, arm (None for outcome 3), held: {w: cells where it holds above 0}, mean: {w: its difference from its
    control averaged over every cell}}. Outcome 1 when GEAR + distillation holds over GRPO + distillation at some w on
    two cells or more; else outcome 2 when GRPO + distillation holds over GRPO on two or more; else 3. Among
    qualifying weights: more cells held, then the higher average."""
    outcomes = (
        (1, "gear-distill-{}", lambda data, w: data["attribution"][f"distillation_weight={w}"]["heldout"]),
        (2, "grpo-distill-{}", lambda data, w: data["arms"][f"grpo-distill-{w}"]["heldout"]["minus_none"]),
    )
    for number, arm, record in outcomes:
        held = {w: sum(_holds_above(record(data, w)) for data in cells.values()) for w in ATTRIBUTION}
        mean = {w: sum(record(data, w)["mean"] for data in cells.values()) / len(cells) for w in ATTRIBUTION}
        qualify = [w for w in ATTRIBUTION if held[w] >= 2]
        if qualify:
            best = max(qualify, key=lambda w: (held[w], mean[w]))
            return {"outcome": number, "arm": arm.format(best), "held": held, "mean": mean}
    return {"outcome": 3, "arm": None, "held": held, "mean": mean}


def followup(runs_by_cell: dict[str, list[dict]], recommended: str, seeds) -> dict:
    """Amendment 5's family D: {cell: {field arm: {metric: record}}} for each field arm (`FIELD_ARMS`) minus the
    recommended arm, in every cell both ran in, paired by seed; Holm within the family, per metric, with each record's
    `beats` (Holm p < 0.05, mean above 0: outcome 4 in that cell)."""
    out: dict = {}
    tests: dict[str, list[dict]] = {name: [] for name in METRICS}
    for cell, cell_runs in runs_by_cell.items():
        ran = {r["label"] for r in cell_runs}
        for arm in FIELD_ARMS:
            if arm not in ran or recommended not in ran:
                continue
            entry = out.setdefault(cell, {}).setdefault(arm, {"minus": recommended})
            for name in METRICS:
                record, _ = compare(cell_runs, arm, recommended, name, seeds)
                entry[name] = record
                tests[name].append(record)
    for family in tests.values():
        for record, p_holm in zip(family, stats.holm([r["p"] for r in family]), strict=True):
            record["p_holm"] = p_holm
            record["beats"] = _holds_above(record)
    return out


EQUIVALENCE_CELL = "independent-k8"
EQUIVALENCE_FRACTION = 0.5
"""Issue 73 item 5, chosen after the study was read (the declaration names no minimum effect): GEAR's weights "add
nothing" to a distillation at weight w in a cell when `gear-distill-w - grpo-distill-w` is equivalent to 0 within
+-margin, margin = half of what that distillation gains over GRPO on `independent-k8` (the one cell where it gains),
per metric: the weights would matter if they moved the result by half of what the distillation itself adds (the
usual non-inferiority convention of preserving half of the reference effect)."""


def equivalence(runs_by_cell: dict[str, list[dict]], seeds) -> dict:
    """Two one-sided tests (`stats.tost`, 90% interval inside +-margin) of GEAR + distillation minus GRPO +
    distillation at each weight (family B's comparisons), per cell and metric, with `EQUIVALENCE_FRACTION` of
    `grpo-distill-w - none` on `EQUIVALENCE_CELL` as the margin; Holm over the family's comparisons per metric
    (`equivalent`: Holm-adjusted TOST p < 0.05). Empty without the anchor cell, or where its distillation gain is not
    above 0 (no margin to take)."""
    anchor = runs_by_cell.get(EQUIVALENCE_CELL)
    if not anchor:
        return {}
    margins: dict = {name: {} for name in METRICS}
    for name in METRICS:
        for weight, (_, grpo_arm) in ATTRIBUTION.items():
            gain = compare(anchor, grpo_arm, "none", name, seeds)[0]["mean"]
            if not gain > 0:
                return {}
            margins[name][weight] = EQUIVALENCE_FRACTION * gain
    cells: dict = {}
    tests: dict[str, list[dict]] = {name: [] for name in METRICS}
    for cell, cell_runs in runs_by_cell.items():
        for weight, (gear_arm, grpo_arm) in ATTRIBUTION.items():
            entry = cells.setdefault(cell, {}).setdefault(
                f"distillation_weight={weight}", {"arm": gear_arm, "minus": grpo_arm}
            )
            for name in METRICS:
                diffs = paired(cell_runs, gear_arm, grpo_arm, name, seeds)
                record = stats.tost(list(diffs.values()), margins[name][weight])
                entry[name] = record
                tests[name].append(record)
    for family in tests.values():
        for record, p_holm in zip(family, stats.holm([r["p"] for r in family]), strict=True):
            record["p_holm"] = p_holm
            record["equivalent"] = p_holm < 0.05
    return {
        "margin": {
            "rule": f"{EQUIVALENCE_FRACTION} x (grpo-distill-w - none) on {EQUIVALENCE_CELL}, per metric and weight",
            "chosen": "after the study was read; the declaration names no minimum effect",
            "cell": EQUIVALENCE_CELL,
            "fraction": EQUIVALENCE_FRACTION,
            **margins,
        },
        "test": "two one-sided paired t-tests at 0.05 each (the 90% t-interval inside +-margin), Holm over the "
        "comparisons of each metric",
        "cells": cells,
    }


def item6_report() -> dict:
    runs_by_cell = collect(ITEM6_SEEDS)
    declared, pending = pending_cells(runs_by_cell, lambda cell: ITEM6["arms"], ITEM6["cells"], ITEM6_SEEDS)
    done = {c: r for c, r in runs_by_cell.items() if c in declared and c not in pending}
    return {
        "title": "Item 6: GRPO + agreement (0.5) against GRPO, the process ceiling and GRPO + distillation (0.5)",
        "declaration": "bench/results/credit_methods/declaration.md (amendment 2)",
        "seeds": ITEM6_SEEDS,
        "window": WINDOW,
        "runs_declared": declared,
        "cells_pending": pending,
        "runs": {cell: len(r) for cell, r in done.items()},
        "cells": summarize_item6(done),
    }


def plot(report: dict, path: Path) -> list[str]:
    """One panel per cell: each arm's held-out accuracy minus GRPO's, paired by seed, with its 95% t-interval; the
    process ceiling (`oracle-process`) and 80% of it as vertical lines where the ceiling's interval lies above 0.
    Returns the cells drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [c for c, data in report["cells"].items() if any(
        e["heldout"]["minus_none"]["n_seeds"] for e in data["arms"].values())]  # fmt: skip
    ncols = min(max(len(cells), 1), 4)
    nrows = max(math.ceil(len(cells) / ncols), 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 0.6 + 4.0 * nrows), squeeze=False)
    for ax in axes.flat[len(cells):]:
        ax.set_visible(False)
    for ax, cell in zip(axes.flat, cells, strict=False):
        arms = [a for a, e in report["cells"][cell]["arms"].items() if e["heldout"]["minus_none"]["n_seeds"]]
        for y, arm in enumerate(arms):
            rec = report["cells"][cell]["arms"][arm]["heldout"]["minus_none"]
            low = 0.0 if math.isnan(rec["ci_low"]) else rec["mean"] - rec["ci_low"]
            high = 0.0 if math.isnan(rec["ci_high"]) else rec["ci_high"] - rec["mean"]
            color = "black" if arm == CEILING else ("tab:orange" if ARMS[arm].get("explore") else "tab:blue")
            ax.errorbar([rec["mean"]], [y], xerr=[[low], [high]], fmt="s" if arm == CEILING else "o", color=color,
                        capsize=3, ms=4, zorder=3)  # fmt: skip
        ceiling = report["cells"][cell]["arms"].get(CEILING, {}).get("heldout", {}).get("minus_none")
        if ceiling and ceiling["n_seeds"] >= 2 and ceiling["ci_low"] > 0:
            ax.axvline(ceiling["mean"], color="tab:gray", ls="--", lw=1)
            ax.axvline(0.8 * ceiling["mean"], color="tab:green", ls=":", lw=1, label="80% of the ceiling")
            ax.legend(fontsize=7, loc="upper left")
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(range(len(arms)), arms, fontsize=7)
        ax.set_ylim(len(arms) - 0.5, -1.1)  # first arm at the top, a free row above it for the legend
        seeds = max(report["cells"][cell]["arms"][a]["heldout"]["minus_none"]["n_seeds"] for a in arms)
        no_ceiling = "" if CEILING in report["cells"][cell]["arms"] else ", no ceiling"  # no per-decision labels
        ax.set_title(f"{cell} (up to {seeds} seeds{no_ceiling})", fontsize=9)
        ax.set_xlabel("held-out accuracy - GRPO, 95% t-interval", fontsize=8)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=5))  # narrow panels: no overlapping labels
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(textwrap.fill(report["title"], 40 * ncols), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return cells


FINDINGS_PLOT = "credit_methods_findings"
"""The results page's one plot (docs/results/credit-methods.md): both confirmatory reports' complete cells."""


def write_report(name: str, result: dict, log) -> dict:
    """`name`.json and .md in the results folder, and its plot where a cell is complete (a confirmatory report with
    no complete cell holds only its run counts)."""
    (RESULTS / f"{name}.json").write_text(reports.dumps(result))
    (RESULTS / f"{name}.md").write_text(markdown(result))
    if result["cells"]:
        plot(result, RESULTS / f"{name}.png")
    complete_runs = sum(result["runs"].values())
    log(f"wrote {RESULTS / name}.json and .md ({complete_runs} runs in complete cells; "
        f"pending: {result.get('cells_pending') or 'none'})")  # fmt: skip
    return result


def findings_plot(declared: dict, item6: dict, path: Path) -> list[str]:
    """The page's plot: `plot` over the declared study's complete cells and item 6's (titled `<cell>, seeds
    200-215`), in one figure; nothing is drawn (and an old figure is removed) while no cell is complete."""
    cells = dict(declared["cells"])
    seeds = f"seeds {item6['seeds'][0]}-{item6['seeds'][-1]}"
    cells.update({f"{cell}, {seeds}": data for cell, data in item6["cells"].items()})
    if not cells:
        path.unlink(missing_ok=True)
        return []
    title = (f"Each arm minus GRPO on held-out accuracy: the declared study (seeds {declared['seeds'][0]}-"
             f"{declared['seeds'][-1]}) and item 6's confirmation ({seeds})")  # fmt: skip
    return plot({"title": title, "cells": cells}, path)


def family_size() -> int:
    """The declared comparisons per metric: family A (every arm but `none` and the ceiling, in each cell it runs in)
    and family B (`ATTRIBUTION` in every cell)."""
    return sum(sum(a not in ("none", CEILING) for a in arms_of(c)) + len(ATTRIBUTION) for c in CELLS)


def kept_runs(runs_dir: Path) -> dict[str, list[dict]]:
    """Every run kept under `runs_dir` (`runs/<cell>/<arm>__seed<N>.json`), by cell: the studies that reuse this
    harness with their own folder (bench/distill_bounds.py, bench/pretrained_credit.py) read theirs with it."""
    found: dict[str, list[dict]] = {}
    for path in sorted(Path(runs_dir).glob("*/*.json")):
        run = json.loads(path.read_text())
        found.setdefault(run["cell"], []).append(run)
    return found


def collect(seeds) -> dict[str, list[dict]]:
    """The committed runs of every cell on `seeds`, by cell, the cells in the declaration's order (`CELLS`)."""
    found: dict[str, list[dict]] = {}
    for path in sorted(RUNS_DIR.glob("*/*.json")):
        run = json.loads(path.read_text())
        if run["seed"] in seeds:
            found.setdefault(run["cell"], []).append(run)
    order = list(CELLS)
    return dict(sorted(found.items(), key=lambda item: order.index(item[0]) if item[0] in order else len(order)))


def count(cell_runs: list[dict], arms, seeds) -> int:
    """How many of the (arm, seed) runs of `arms` x `seeds` are among a cell's runs."""
    have = {(r["label"], r["seed"]) for r in cell_runs}
    return sum((arm, seed) in have for arm in arms for seed in seeds)


def complete(cell_runs: list[dict], arms, seeds) -> bool:
    """Whether every arm of `arms` has run on every seed of `seeds` among a cell's runs."""
    return count(cell_runs, arms, seeds) == len(arms) * len(seeds)


def pending_cells(runs_by_cell: dict[str, list[dict]], arms_of_cell, cells, seeds) -> tuple[dict, dict]:
    """({cell: runs declared}, {cell: runs in} for the cells not yet complete) over the declared `cells`."""
    declared = {c: len(arms_of_cell(c)) * len(seeds) for c in cells}
    counts = {c: count(runs_by_cell.get(c, []), arms_of_cell(c), seeds) for c in cells}
    return declared, {c: n for c, n in counts.items() if n < declared[c]}


def report(seeds, confirmatory: bool) -> dict:
    """The report on `seeds`. A confirmatory report holds only the cells whose declared runs are all in (the others
    are listed in `cells_pending` with how many of their `runs_declared` are in, and no figure of theirs is computed:
    nothing is read of a cell's confirmatory runs before it is whole). Once every declared cell is in, it also holds
    the declared outcome (`recommendation`) and, where a setting is recommended, amendment 5's family D (`followup`)."""
    runs_by_cell = collect(seeds)
    pending, planned = {}, {}
    if confirmatory:
        planned, pending = pending_cells(runs_by_cell, arms_of, CELLS, CONFIRMATORY)
        runs_by_cell = {c: r for c, r in runs_by_cell.items() if c not in pending}
    declared = family_size() if confirmatory else None
    out = {
        "runs_declared": planned,
        "cells_pending": pending,
        "title": "Credit methods: each arm minus GRPO, paired by seed"
        + (" (confirmatory seeds)" if confirmatory else " (exploration)"),
        "declaration": "bench/results/credit_methods/declaration.md",
        "seeds": sorted(seeds),
        "window": WINDOW,
        "runs": {cell: len(r) for cell, r in runs_by_cell.items()},
        "cells": summarize(runs_by_cell, set(seeds), family_size=declared, explore=not confirmatory),
        "dynamics": {
            "opening": OPENING,
            "window": WINDOW,
            "cells": {cell: dynamics(r, set(seeds)) for cell, r in runs_by_cell.items()},
        },
    }
    if confirmatory and runs_by_cell and not pending:  # every cell read: the declared outcome and its follow-up
        out["recommendation"] = recommendation(out["cells"])
        if out["recommendation"]["arm"]:
            out["followup"] = followup(runs_by_cell, out["recommendation"]["arm"], set(seeds))
        out["equivalence"] = equivalence(runs_by_cell, set(seeds))  # issue 73 item 5, margin chosen after reading
    return out


def _git(root: Path, *args: str) -> str | None:
    out = subprocess.run(["git", *args], capture_output=True, text=True, cwd=root, check=False)
    return out.stdout if out.returncode == 0 else None


def declaration_order(root: Path | None = None) -> list[str] | None:
    """Whether git history has the declaration before the runs it governs, as a list of what breaks the order (empty
    when nothing does): every committed run of `root`/runs is younger than declaration.md, every run on item 6's seeds
    younger than amendment 2, every confirmatory run of a cell after `independent-k8` younger than amendment 4 (the
    arm cuts decided once that cell was read), each by the commit that first added it; and amendment 5 older than
    `calculator`'s last confirmatory run. An uncommitted run is not judged. None where `root` is not in a git
    checkout or its declaration was never committed. One `git log` over the folder, then one per amendment."""
    root = Path(root or RESULTS)
    log = _git(root, "log", "--diff-filter=A", "--format=@%ct", "--name-only", "--relative", "--", ".")
    if log is None:
        return None
    added: dict[str, int] = {}
    stamp = 0
    for line in log.splitlines():  # newest commit first: a path's last stamp is its first addition
        if line.startswith("@"):
            stamp = int(line[1:])
        elif line.strip():
            added[line.strip()] = stamp
    declared = added.get("declaration.md")
    if declared is None:
        return None

    def amended(number: int) -> int | None:  # the commit that added the amendment's heading
        heading = f"## Amendment {number} "
        out = (_git(root, "log", "--format=%ct", "-S", heading, "--", "declaration.md") or "").split()
        return int(out[-1]) if out else None

    floors = {"the declaration": declared, "amendment 2": amended(2), "amendment 4": amended(4)}
    problems = []
    for path in sorted((root / "runs").glob("*/*.json")):
        name = path.relative_to(root).as_posix()
        seed, cell = int(path.stem.rsplit("__seed", 1)[1]), path.parent.name
        if seed in ITEM6_SEEDS:
            floor = "amendment 2"
        elif seed in CONFIRMATORY and cell != "independent-k8":
            floor = "amendment 4"
        else:
            floor = "the declaration"
        if name in added and (floors[floor] is None or added[name] < floors[floor]):
            problems.append(f"{name} was committed before {floor}")
    calculator = [added.get(f"runs/calculator/{arm}__seed{seed}.json") for arm in arms_of("calculator")
                  for seed in CONFIRMATORY]  # fmt: skip
    fifth = amended(5)
    if None not in calculator and (fifth is None or max(calculator) <= fifth):
        problems.append("calculator's last confirmatory run is not younger than amendment 5")
    return problems


def make_parser() -> argparse.ArgumentParser:
    parser = jobs.study_parser(__doc__, sorted(CELLS), sorted(ARMS), study="credit_methods",
                               arms_default="the cell's declared ones", seeds_default="the declared confirmatory ones",
                               report_help="Write the reports from the committed runs only (after "
                               "--check-declaration's check).")  # fmt: skip
    parser.add_argument("--check-declaration", action="store_true", help="Check, in git history, that the declaration "
                        "and its amendments came before the runs they govern; run nothing.")  # fmt: skip
    return parser


def main(argv: list[str] | None = None, log=print) -> dict:
    parser = make_parser()
    args = parser.parse_args(argv)
    seeds = args.seeds or CONFIRMATORY
    stray = [s for s in seeds if s not in CONFIRMATORY and s not in EXPLORATION and s not in ITEM6_SEEDS]
    if stray:
        parser.error(f"seeds {stray} are neither the declared confirmatory seeds {CONFIRMATORY}, item 6's "
                     f"{ITEM6_SEEDS[0]}-{ITEM6_SEEDS[-1]} nor exploration 0-47")  # fmt: skip
    item6 = [s for s in seeds if s in ITEM6_SEEDS]
    if item6 and (len(item6) != len(seeds) or set(args.arms or ITEM6["arms"]) - set(ITEM6["arms"])
                  or set(args.cell or []) - set(ITEM6["cells"])):  # fmt: skip
        parser.error(f"seeds {ITEM6_SEEDS[0]}-{ITEM6_SEEDS[-1]} run amendment 2's arms {ITEM6['arms']} in its cells "
                     f"{ITEM6['cells']} only, on their own")  # fmt: skip
    if args.check_declaration or args.report_only:  # git history's order, checked once by the study, not by the tests
        problems = declaration_order()
        for problem in problems or []:
            log(f"declaration order: {problem}")
        if problems:
            raise SystemExit(1)
        log("declaration order: not a git checkout, not checked" if problems is None else "declaration order: holds")
        if args.check_declaration:
            return {}
    wall = time.perf_counter()
    if not args.report_only:
        if not args.cell:
            parser.error("name the cells to run with --cell (the declaration runs independent-k8 first)")
        work_root = Path(args.work_dir or REPO_ROOT / "outputs" / "credit_methods")
        # seed-major: a study cut off mid-cell has every arm's first seeds
        default_arms = (lambda cell: ITEM6["arms"]) if item6 else arms_of
        planned = [job_for(cell, arm, seed, work_root) for cell in args.cell for seed in seeds
                   for arm in (args.arms or default_arms(cell))]  # fmt: skip
        blind = any(s in CONFIRMATORY or s in ITEM6_SEEDS for s in seeds)  # declared seeds: no score before the report
        jobs.run_jobs(planned, args.workers, False, log, dispatch=dispatch, cached=cached, blind=blind)
    out = {}
    for confirmatory, name in ((True, "credit_methods"), (False, "credit_methods_exploration")):
        chosen = CONFIRMATORY if confirmatory else list(EXPLORATION)
        result = {**report(chosen, confirmatory), **reports.provenance(wall)}
        if not confirmatory and not any(result["runs"].values()):
            continue
        out[name] = write_report(name, result, log)
    out["credit_methods_item6"] = write_report("credit_methods_item6", {**item6_report(), **reports.provenance(wall)}, log)
    drawn = findings_plot(out["credit_methods"], out["credit_methods_item6"], RESULTS / f"{FINDINGS_PLOT}.png")
    if drawn:
        log(f"wrote {RESULTS / FINDINGS_PLOT}.png ({', '.join(drawn)})")
    if out:  # the folder's manifest lists what it holds (bench.harness.index)
        files = {}
        for name in out:
            files[f"{name}.json"] = (
                "the report: per complete cell and arm, each metric minus GRPO (mean, 95% interval, p, Holm-adjusted "
                "p, seeds) and the share of the process ceiling; the cells still running, with their run counts"
            )
            files[f"{name}.md"] = "its table"
            if (RESULTS / f"{name}.png").exists():
                files[f"{name}.png"] = "its plot: held-out accuracy minus GRPO per cell and arm"
        if (RESULTS / f"{FINDINGS_PLOT}.png").exists():
            files[f"{FINDINGS_PLOT}.png"] = (
                "the results page's plot: the declared study's and item 6's complete cells, one panel each"
            )
        index.list_files(RESULTS, files)
    return out


if __name__ == "__main__":
    main()
