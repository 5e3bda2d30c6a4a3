"""Which bound or gate stops self-distillation's collapse on the tool task without losing its gain on many
independent decisions? Issue 73 item 1's stage-1 exploration (bench/results/distill_bounds/PLAN.md): GRPO + the 0.5
distillation blend with one option each, on seeds 0-7 of the credit-methods study's `calculator` and `independent-k8`
cells, over that study's harness (same recipes, same run spec, same held-out scoring).

    python -m bench.distill_bounds --cell calculator        # stage 1's runs of a cell, seed-major, resumable
    python -m bench.distill_bounds --report-only            # distill_bounds_stage1.json / .md from the kept runs

Stage 1 is exploration: seed-paired differences with 95% t-intervals, no Holm. Every finished run is kept at once
under `runs/<cell>/<arm>__seed<N>.json` in this folder (the cache across sessions); a control the credit-methods
study already ran with the same spec on these seeds is read from its folder instead of trained again.

Item 4's confirmation runs only once `declaration.json` is committed here (its seeds, the chosen variant, the margin,
the arms per cell):

    python -m bench.distill_bounds --cell calculator --seeds 300 301 ...   # declared runs: blind, resumable

A declared seed runs only while this script matches the declaration (`declaration_drift`); `distill_bounds.json` /
`.md` then hold each cell once all its declared runs are in, the Holm-corrected family per metric and the declared
verdict (`confirmation`, `verdict`).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from bench import credit_methods as cm
from bench.harness import REPO_ROOT, index, jobs, reports, results_dir, stats

RESULTS = results_dir("distill_bounds")
RUNS_DIR = RESULTS / "runs"
DECLARATION_PATH = RESULTS / "declaration.json"
STAGE1_SEEDS = tuple(range(8))
CELLS = ("calculator", "independent-k8")
"""Where the collapse is (`calculator`, the tool task) and where the blend gains (`independent-k8`)."""
BLEND = "grpo-distill-0.5"
VARIANTS = {
    "gd-mixed-0.5": ["--distillation_gate", "mixed"],
    "gd-failed-0.5": ["--distillation_gate", "failed"],
    "gd-base-0.5": ["--teacher", "base"],
    "gd-clip0.2-0.5": ["--distillation_clip", "0.2"],
    "gd-bound1-0.5": ["--distillation_bound", "1.0"],
    "gd-ema-0.5": ["--teacher", "ema"],
}
"""PLAN.md's stage-1 variants: the 0.5 blend plus one option (docs/configuration.md says what each is)."""
STAGE1_ARMS = {
    "none": cm.ARMS["none"],
    BLEND: cm.ARMS[BLEND],
    **{name: {"credit": "none", "reference": True, "set": ["--distillation_weight", "0.5", *extra]}
       for name, extra in VARIANTS.items()},
}  # fmt: skip
CONFIRMATION_ONLY = ("grpo-agree-0.5", "sdpo-trl-fair-0.5")
"""Item 4's arms beyond stage 1's: agreement at 0.5 (never run on the tool task) and the fair SDPO arm (issue 73 item
3; `independent-k8` only: SDPOTrainer takes no tools), both as the credit-methods study defines them."""
ARMS = {**STAGE1_ARMS, **{name: cm.ARMS[name] for name in CONFIRMATION_ONLY}}
MARGIN = 0.03
"""PLAN.md's draft qualification margin on `calculator`: a variant's held-out mean minus GRPO's above -0.03."""
KEEP = 0.8
"""PLAN.md: a qualifying variant keeps at least 0.8 of the blend's `independent-k8` gain over GRPO."""
SHARE_LIMIT = 0.5
"""A seed whose final-window distillation share is above this has collapsed (the collapse monitor's level)."""
WINDOW = cm.WINDOW


def job_for(cell: str, arm: str, seed: int, work_root: Path) -> dict:
    return {**cm.job_for(cell, arm, seed, work_root, arms=ARMS), "runs_dir": str(RUNS_DIR)}


def cached(job: dict) -> dict | None:
    """The kept result of `job` if its spec still holds; else the credit-methods study's run with the same spec (a
    control it ran on these seeds), copied here with where it came from."""
    path = cm.kept_path(job)
    if path.exists():
        result = json.loads(path.read_text())
        if result.get("spec") == cm.spec_of(job):
            return result
    theirs = cm.kept_path({**job, "runs_dir": None})
    if theirs.exists():
        result = json.loads(theirs.read_text())
        if result.get("spec") == cm.spec_of(job):
            source = theirs.relative_to(REPO_ROOT) if theirs.is_relative_to(REPO_ROOT) else theirs
            result = {**result, "label": job["label"], "imported_from": source.as_posix()}
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(result, indent=1) + "\n")
            return result
    return None


# ---------------------------------------------------------------------------------------------------------------------
# The stage-1 reading (pure)
# ---------------------------------------------------------------------------------------------------------------------


def final_window(run: dict, series: str) -> float | None:
    """The mean of a run's last `WINDOW` logged values of `series` (None and NaN skipped); None if it has none."""
    return stats.nan_mean((run.get(series) or [])[-WINDOW:])


def collapse_block(cell_runs: list[dict], arm: str, seeds) -> dict:
    """Per arm: the seed means of the final-window distillation share and entropy, the seeds whose final-window share
    is above `SHARE_LIMIT`, the seeds whose final-window training reward is 0 (`dead_seeds`: every group fails, so
    GRPO's advantage is 0 and a gated term is off too, and the run cannot climb back; a collapse the share misses
    under a gate), and the seeds on which the collapse monitor warned."""
    mine = sorted((r for r in cell_runs if r["label"] == arm and r["seed"] in seeds), key=lambda r: r["seed"])
    shares = {r["seed"]: final_window(r, "distill_share") for r in mine}
    return {
        "distill_share": stats.nan_mean(v for v in shares.values() if v is not None),
        "entropy": stats.nan_mean(v for v in (final_window(r, "entropy") for r in mine) if v is not None),
        "collapsed_seeds": [s for s, v in shares.items() if v is not None and v > SHARE_LIMIT],
        "dead_seeds": [r["seed"] for r in mine if final_window(r, "reward") == 0.0],
        "warned_seeds": [r["seed"] for r in mine if any(w == 1.0 for w in r.get("collapse_warning") or [])],
        "n_seeds": len(mine),
    }


def _greedy(run: dict) -> float:
    value = (run.get("eval") or {}).get("greedy_accuracy")
    return math.nan if value is None else value


def minus_none(cell_runs: list[dict], arm: str, seeds) -> dict:
    """`arm` minus `none` per metric, paired by seed: {heldout, greedy, reward: {mean, ci_low, ci_high, n_seeds}}."""
    out = {}
    for name in ("heldout", "reward"):
        record, _ = cm.compare(cell_runs, arm, "none", name, seeds)
        out[name] = {k: record[k] for k in ("mean", "ci_low", "ci_high", "n_seeds")}
    mine = {r["seed"]: r for r in cell_runs if r["label"] == arm and r["seed"] in seeds}
    base = {r["seed"]: r for r in cell_runs if r["label"] == "none" and r["seed"] in seeds}
    greedy = [_greedy(mine[s]) - _greedy(base[s]) for s in sorted(set(mine) & set(base))]
    interval = stats.paired_interval([g for g in greedy if not math.isnan(g)])
    out["greedy"] = {k: interval[k] for k in ("mean", "ci_low", "ci_high", "n_seeds")}
    return out


def gain_kept(cell_runs: list[dict], arm: str, seeds) -> dict | None:
    """mean(`arm` - none) / mean(`BLEND` - none) held-out over the seeds all three ran, with its paired bootstrap
    interval; None when fewer than 2 such seeds or the blend's mean gain is not above 0 (no gain to keep)."""
    mine = cm.paired(cell_runs, arm, "none", "heldout", seeds)
    blend = cm.paired(cell_runs, BLEND, "none", "heldout", seeds)
    both = sorted(set(mine) & set(blend))
    if len(both) < 2 or sum(blend[s] for s in both) <= 0:
        return None
    return stats.bootstrap_ratio({s: mine[s] for s in both}, {s: blend[s] for s in both})


def minus_blend(cell_runs: list[dict], arm: str, seeds) -> dict:
    """`arm` minus the blend, held-out, paired by seed: {mean, ci_low, ci_high, n_seeds} (PLAN.md's amended
    `independent-k8` reading when the blend has no gain to keep)."""
    diffs = cm.paired(cell_runs, arm, BLEND, "heldout", seeds)
    interval = stats.paired_interval(list(diffs.values()))
    return {k: interval[k] for k in ("mean", "ci_low", "ci_high", "n_seeds")}


def qualifies(
    calculator: dict | None, independent: dict | None, seeds: int = len(STAGE1_SEEDS), blend_holds: bool | None = True
) -> bool | None:
    """PLAN.md's rule, read only once a cell has the arm paired on all `seeds` stage-1 seeds: on `calculator` held-out
    minus GRPO above -`MARGIN` with no collapsed seed, and on `independent-k8` at least `KEEP` of the blend's gain
    kept where that gain holds above 0 (`blend_holds`), or else (the 2026-12-06 amendment: no gain to keep) the arm's
    held-out minus the blend's (`minus_blend`) above -`MARGIN`. None while either cell lacks the figures; False as
    soon as the complete calculator half fails."""

    def whole(entry: dict | None) -> dict | None:
        held = (entry or {}).get("minus_none", {}).get("heldout", {})
        return entry if held.get("n_seeds", 0) >= seeds else None

    calculator, independent = whole(calculator), whole(independent)
    if calculator is not None:
        held = calculator["minus_none"]["heldout"]["mean"]
        if (
            held is not None
            and not math.isnan(held)
            and (held <= -MARGIN or calculator["collapse"]["collapsed_seeds"])
        ):
            return False
    if calculator is None or independent is None or blend_holds is None:
        return None
    held = calculator["minus_none"]["heldout"]["mean"]
    if held is None or math.isnan(held):
        return None
    if blend_holds:
        kept = independent.get("gain_kept")
        return None if kept is None else kept["mean"] >= KEEP
    behind = (independent.get("minus_blend") or {}).get("mean")
    if behind is None or math.isnan(behind):
        return None
    return behind > -MARGIN


def blend_gain_holds(independent_arms: dict, seeds: int = len(STAGE1_SEEDS)) -> bool | None:
    """Whether the blend's `independent-k8` held-out gain over GRPO holds above 0 (its 95% interval), once it has all
    `seeds`; None before."""
    held = ((independent_arms.get(BLEND) or {}).get("minus_none") or {}).get("heldout") or {}
    if held.get("n_seeds", 0) < seeds or held.get("ci_low") is None or math.isnan(held["ci_low"]):
        return None
    return held["ci_low"] > 0


def stage1(runs_by_cell: dict[str, list[dict]], seeds=STAGE1_SEEDS) -> dict:
    """The stage-1 report's `cells` (per cell and arm: `minus_none`, `collapse`, and on `independent-k8`
    `gain_kept`) and `qualifies` (per variant)."""
    seeds = set(seeds)
    cells: dict = {}
    for cell in CELLS:
        cell_runs = runs_by_cell.get(cell, [])
        ran = {r["label"] for r in cell_runs if r["seed"] in seeds}
        out = cells[cell] = {"arms": {}}
        for arm in ARMS:
            if arm not in ran:
                continue
            entry = out["arms"][arm] = {"collapse": collapse_block(cell_runs, arm, seeds)}
            if arm != "none":
                entry["minus_none"] = minus_none(cell_runs, arm, seeds)
            if cell == "independent-k8" and arm in VARIANTS:
                entry["gain_kept"] = gain_kept(cell_runs, arm, seeds)
                entry["minus_blend"] = minus_blend(cell_runs, arm, seeds)
    holds = blend_gain_holds(cells["independent-k8"]["arms"])
    verdicts = {arm: qualifies(cells["calculator"]["arms"].get(arm), cells["independent-k8"]["arms"].get(arm),
                               blend_holds=holds) for arm in VARIANTS}  # fmt: skip
    return {"cells": cells, "blend_gain_holds": holds, "qualifies": verdicts}


def _fmt(record: dict | None) -> str:
    if not record or record.get("n_seeds", 0) < 2 or record["mean"] is None or math.isnan(record["mean"]):
        return "-"
    return f"{record['mean']:+.3f} [{record['ci_low']:+.3f}, {record['ci_high']:+.3f}] ({record['n_seeds']})"


def markdown(report: dict) -> str:
    lines = [f"# {report['title']}", "", report["what"], "",
             ("| cell | arm | held-out - GRPO (seeds) | greedy - GRPO | reward - GRPO | final distill share | "
              "final entropy | collapsed seeds | dead seeds | monitor warned | share of the blend's gain kept | "
              "held-out - blend |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for cell, out in report["cells"].items():
        for arm, entry in out["arms"].items():
            diff = entry.get("minus_none", {})
            c = entry["collapse"]
            kept = entry.get("gain_kept")
            share = "-" if c["distill_share"] is None else f"{c['distill_share']:.2f}"
            entropy = "-" if c["entropy"] is None else f"{c['entropy']:.3f}"
            kept_text = "-" if not kept else f"{kept['mean']:.2f} [{kept['ci_low']:.2f}, {kept['ci_high']:.2f}]"
            lines.append(f"| {cell} | {arm} | {_fmt(diff.get('heldout'))} | {_fmt(diff.get('greedy'))} | "
                         f"{_fmt(diff.get('reward'))} | {share} | {entropy} | {c['collapsed_seeds'] or '-'} | "
                         f"{c.get('dead_seeds') or '-'} | {c['warned_seeds'] or '-'} | {kept_text} | "
                         f"{_fmt(entry.get('minus_blend'))} |")  # fmt: skip
    holds = report.get("blend_gain_holds")
    lines += ["", "The blend's `independent-k8` gain over GRPO "
              + {True: "holds above 0, so a variant must keep 0.8 of it.",
                 False: "does not hold above 0, so a variant's held-out minus the blend's must be above -0.03 "
                        "(PLAN.md, amendments).", None: "is not yet read (seeds missing)."}[holds]]  # fmt: skip
    lines += ["", "Qualifies (PLAN.md's rule; None: not yet decidable): "
              + ", ".join(f"`{a}` {v}" for a, v in report["qualifies"].items()), ""]  # fmt: skip
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# The confirmation (issue 73 item 4; pure): declared seeds, Holm over the declared family, the declared verdict
# ---------------------------------------------------------------------------------------------------------------------

METRICS = ("heldout", "greedy", "reward")
"""`heldout` (sampled accuracy) is primary; `greedy` and the final-window `reward` are secondary, each its own Holm
family over the same comparisons."""


def declaration() -> dict | None:
    return json.loads(DECLARATION_PATH.read_text()) if DECLARATION_PATH.exists() else None


def declaration_drift(declared: dict) -> list[str]:
    """What in this script differs from the committed declaration: a declared arm unknown here or set differently,
    the chosen variant not a stage-1 variant. A declared seed runs only when this is empty."""
    problems = []
    if declared.get("chosen") not in VARIANTS:
        problems.append(f"the chosen variant {declared.get('chosen')!r} is not one of {sorted(VARIANTS)}")
    cells = declared.get("arms") or {}
    problems += [f"cell {cell!r} is not one of {list(CELLS)}" for cell in cells if cell not in CELLS]
    for arm in dict.fromkeys(a for arms in cells.values() for a in arms):
        if arm not in ARMS:
            problems.append(f"arm {arm!r} is not defined here")
        elif (declared.get("settings") or {}).get(arm) != ARMS[arm]:
            problems.append(f"arm {arm!r}'s settings differ from the declared ones")
    return problems


def _metric(run: dict, name: str) -> float:
    return _greedy(run) if name == "greedy" else cm.metric(run, name)


def _diffs(cell_runs: list[dict], arm: str, baseline: str, name: str, seeds) -> list[float]:
    mine = {r["seed"]: r for r in cell_runs if r["label"] == arm and r["seed"] in seeds}
    base = {r["seed"]: r for r in cell_runs if r["label"] == baseline and r["seed"] in seeds}
    values = [_metric(mine[s], name) - _metric(base[s], name) for s in sorted(set(mine) & set(base))]
    return [v for v in values if not math.isnan(v)]


def _two_sided(diffs: list[float]) -> dict:
    interval = stats.paired_interval(diffs)
    return {**{k: interval[k] for k in ("mean", "ci_low", "ci_high", "n_seeds")}, "p": stats.t_p_value(diffs)}


def _not_below(diffs: list[float], margin: float) -> dict:
    """Non-inferiority: H0 mean <= -margin against mean > -margin, one-sided paired t-test (`stats.tost`'s lower
    test); the 95% two-sided interval beside it."""
    record = _two_sided(diffs)
    return {**record, "margin": margin, "p": stats.tost(diffs, margin)["p_lower"] if len(diffs) >= 2 else math.nan}


def confirmation(runs_by_cell: dict[str, list[dict]], declared: dict) -> dict:
    """The declared report. A cell is read only when every declared run of it is in (else `cells_pending`); the
    verdict only when both are. Per cell and arm: `collapse` (the stage-1 block) and per metric `minus_none` {mean,
    ci_low, ci_high, n_seeds, p, p_holm}. The family per metric (Holm over all of it): every arm minus `none` in each
    cell (two-sided); on `calculator` the chosen variant's non-inferiority to `none` at the margin (comparison 1); on
    `independent-k8` its non-inferiority to the blend (comparison 3's fallback) and the fair SDPO arm minus the blend
    (comparison 4), kept in `comparisons`."""
    seeds, chosen, margin = set(declared["seeds"]), declared["chosen"], float(declared["margin"])
    cells: dict = {}
    pending: dict = {}
    for cell, arms in declared["arms"].items():
        cell_runs = [r for r in runs_by_cell.get(cell, []) if r["seed"] in seeds]
        have = {(r["label"], r["seed"]) for r in cell_runs}
        n = sum((arm, seed) in have for arm in arms for seed in seeds)
        if n < len(arms) * len(seeds):
            pending[cell] = {"runs_in": n, "runs_declared": len(arms) * len(seeds)}
            continue
        cells[cell] = {"arms": {arm: {"collapse": collapse_block(cell_runs, arm, seeds)} for arm in arms}}
    comparisons: dict = {name: {} for name in METRICS}
    for name in METRICS:
        family = []
        for cell, out in cells.items():
            cell_runs = runs_by_cell[cell]
            for arm, entry in out["arms"].items():
                if arm == "none":
                    continue
                record = _two_sided(_diffs(cell_runs, arm, "none", name, seeds))
                entry[name] = {"minus_none": record}
                family.append(record)
            extra = {}
            if cell == "calculator" and chosen in out["arms"]:
                extra["chosen_not_below_none"] = _not_below(_diffs(cell_runs, chosen, "none", name, seeds), margin)
            if cell == "independent-k8":
                if chosen in out["arms"]:
                    extra["chosen_not_below_blend"] = _not_below(_diffs(cell_runs, chosen, BLEND, name, seeds), margin)
                if "sdpo-trl-fair-0.5" in out["arms"]:
                    extra["sdpo_fair_minus_blend"] = _two_sided(_diffs(cell_runs, "sdpo-trl-fair-0.5", BLEND, name,
                                                                       seeds))  # fmt: skip
            comparisons[name][cell] = extra
            family.extend(extra.values())
        for record, p_holm in zip(family, stats.holm([r["p"] for r in family]), strict=True):
            record["p_holm"] = p_holm
    if "independent-k8" in cells and chosen in cells["independent-k8"]["arms"]:
        k8 = runs_by_cell["independent-k8"]
        cells["independent-k8"]["gain_kept"] = stats.bootstrap_ratio(
            cm.paired(k8, chosen, "none", "heldout", seeds), cm.paired(k8, BLEND, "none", "heldout", seeds)
        )
    return {"cells": cells, "cells_pending": pending, "comparisons": comparisons,
            "verdict": verdict(cells, comparisons["heldout"], declared) if not pending else None}  # fmt: skip


def _holds(record: dict | None, sign: int) -> bool:
    """Holm-adjusted p < 0.05 with the mean on the given side of 0 (sign 0: the one-sided test's own side)."""
    if not record or record.get("p_holm") is None or math.isnan(record["p_holm"]):
        return False
    return record["p_holm"] < 0.05 and (sign == 0 or sign * record["mean"] > 0)


def verdict(cells: dict, heldout: dict, declared: dict) -> dict:
    """The declaration's reading of the primary metric: (1) on `calculator` the chosen variant is not below GRPO by
    more than the margin; (2) the plain blend is below GRPO there (the collapse, again); (3) on `independent-k8` the
    variant keeps at least `keep` of the blend's gain (above 0, with the ratio's point estimate at least `keep`) where
    that gain holds, else it is not below the blend by more than the margin. `passes`: all three; `variant_holds`: 1
    and 3 (the reading when 2 fails: no collapse on fresh seeds)."""
    chosen = declared["chosen"]
    k8 = cells["independent-k8"]["arms"]
    one = _holds(heldout["calculator"].get("chosen_not_below_none"), 0)
    two = _holds(cells["calculator"]["arms"][BLEND]["heldout"]["minus_none"], -1)
    blend_holds = _holds(k8[BLEND]["heldout"]["minus_none"], +1)
    if blend_holds:
        ratio = cells["independent-k8"].get("gain_kept") or {}
        three = _holds(k8[chosen]["heldout"]["minus_none"], +1) and (ratio.get("mean") or 0) >= declared["keep"]
    else:
        three = _holds(heldout["independent-k8"].get("chosen_not_below_blend"), 0)
    return {"1_not_below_grpo_on_calculator": one, "2_blend_collapses_on_calculator": two,
            "blend_gain_holds_on_independent_k8": blend_holds, "3_keeps_the_independent_k8_gain": three,
            "passes": one and two and three, "variant_holds": one and three}  # fmt: skip


def collect() -> dict[str, list[dict]]:
    return cm.kept_runs(RUNS_DIR)


def confirmation_markdown(report: dict) -> str:
    """The declared report as a table (the results page is written from it once every run is in)."""
    seeds = f"{report['seeds'][0]}-{report['seeds'][-1]}"
    what = f"Declaration: `{report['declaration']}`. Seeds {seeds}; paired t-tests, Holm per metric over the family."
    lines = [f"# {report['title']}", "", what, ""]
    if report["cells_pending"]:
        lines += ["Pending (nothing of a cell is read before all its runs are in): "
                  + ", ".join(f"{c} {v['runs_in']}/{v['runs_declared']}" for c, v in report["cells_pending"].items()),
                  ""]  # fmt: skip
    header = ("| cell | arm | held-out - GRPO | Holm p | greedy - GRPO | reward - GRPO | final distill share | "
              "final entropy | collapsed seeds | dead seeds | monitor warned |")
    lines += [header, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for cell, out in report["cells"].items():
        for arm, entry in out["arms"].items():
            c = entry["collapse"]
            held = (entry.get("heldout") or {}).get("minus_none")
            p_holm = "-" if not held else f"{held['p_holm']:.3g}"
            share = "-" if c["distill_share"] is None else f"{c['distill_share']:.2f}"
            entropy = "-" if c["entropy"] is None else f"{c['entropy']:.3f}"
            lines.append(f"| {cell} | {arm} | {_fmt(held)} | {p_holm} | "
                         f"{_fmt((entry.get('greedy') or {}).get('minus_none'))} | "
                         f"{_fmt((entry.get('reward') or {}).get('minus_none'))} | {share} | {entropy} | "
                         f"{c['collapsed_seeds'] or '-'} | {c.get('dead_seeds') or '-'} | {c['warned_seeds'] or '-'} |")
    if report.get("verdict"):
        lines += ["", "Verdict (held-out, the declaration's reading): "
                  + ", ".join(f"{k} {v}" for k, v in report["verdict"].items())]  # fmt: skip
    return "\n".join(lines) + "\n"


PLOT = "distill_bounds"
"""The results page's one plot, `distill_bounds.png` in this folder: the confirmation's complete cells."""


def plot(report: dict, path: Path) -> list[str]:
    """One panel per complete cell of the declared report: each arm's held-out accuracy minus GRPO's, paired by seed,
    with its 95% t-interval, the arm's collapsed seeds in its label; on `calculator` the non-inferiority margin as a
    dotted line at -margin. Returns the cells drawn (none: no file written)."""
    panels = []
    for cell, entry in report["cells"].items():
        rows = []
        for arm, arm_entry in entry["arms"].items():
            if arm == "none":
                continue
            collapse = arm_entry["collapse"]
            bad = len(collapse["collapsed_seeds"])
            rows.append({"label": f"{arm}\n({bad}/{collapse['n_seeds']} collapsed)" if bad else arm,
                         "record": arm_entry["heldout"]["minus_none"],
                         "color": "tab:green" if arm == report["chosen"] else ("tab:red" if arm == BLEND else "tab:blue")})  # fmt: skip
        margin = report["margin"]
        panels.append({"title": f"{cell} (seeds {report['seeds'][0]}-{report['seeds'][-1]})", "rows": rows,
                       "line": (-margin, f"-{margin} (margin)") if cell == "calculator" else None})  # fmt: skip
    if panels:
        reports.interval_panels(panels, "Bounded self-distillation on fresh seeds: each arm minus GRPO", path)
    return list(report["cells"])


def main(argv: list[str] | None = None, log=print) -> dict:
    parser = jobs.study_parser(__doc__, CELLS, list(ARMS), study="distill_bounds", arms_default="all of stage 1's",
                               seeds_default="stage 1's, 0-7")  # fmt: skip
    args = parser.parse_args(argv)
    declared = declaration()
    seeds = args.seeds or list(STAGE1_SEEDS)
    confirm = bool(declared) and any(s in declared["seeds"] for s in seeds)
    stray = [s for s in seeds if s not in cm.EXPLORATION and not (declared and s in declared["seeds"])]
    if stray:
        parser.error(f"seeds {stray} are not exploration seeds (0-47); the confirmation needs its declaration first")
    if confirm and any(s in cm.EXPLORATION for s in seeds):
        parser.error("run exploration and declared seeds separately")
    if confirm and declaration_drift(declared):
        parser.error("the code no longer matches declaration.json: " + "; ".join(declaration_drift(declared)))
    wall = time.perf_counter()
    if not args.report_only:
        if not args.cell:
            parser.error("name the cells to run with --cell")
        work_root = Path(args.work_dir or REPO_ROOT / "outputs" / "distill_bounds")
        if confirm:
            arms_of = {cell: [a for a in declared["arms"][cell] if not args.arms or a in args.arms] for cell in args.cell}
        else:
            arms_of = {cell: list(args.arms or STAGE1_ARMS) for cell in args.cell}
        planned = [job_for(cell, arm, seed, work_root) for cell in args.cell for seed in seeds
                   for arm in arms_of[cell]]  # fmt: skip
        jobs.run_jobs(planned, args.workers, False, log, dispatch=cm.dispatch, cached=cached, blind=confirm)
    report = {
        "title": "Bounded and gated self-distillation, stage 1 (exploration): each arm minus GRPO, paired by seed",
        "what": "Issue 73 item 1, PLAN.md's stage 1: seeds 0-7, 95% t-intervals, no correction; exploration only.",
        "plan": "bench/results/distill_bounds/PLAN.md",
        "seeds": sorted(STAGE1_SEEDS),
        "window": WINDOW,
        "rule": {"margin": MARGIN, "keep": KEEP, "share_limit": SHARE_LIMIT},
        "runs": {cell: sum(r["seed"] in STAGE1_SEEDS for r in cell_runs) for cell, cell_runs in collect().items()},
        **stage1(collect()),
        **reports.provenance(wall),
    }
    (RESULTS / "distill_bounds_stage1.json").write_text(reports.dumps(report))
    (RESULTS / "distill_bounds_stage1.md").write_text(markdown(report))
    log(f"wrote {RESULTS / 'distill_bounds_stage1'}.json and .md ({report['runs']})")
    if declared:
        confirmed = {
            "title": "Bounded and gated self-distillation, the declared confirmation: each arm minus GRPO",
            "declaration": DECLARATION_PATH.relative_to(REPO_ROOT).as_posix(),
            "seeds": sorted(declared["seeds"]),
            "chosen": declared["chosen"],
            "margin": declared["margin"],
            "window": WINDOW,
            **confirmation(collect(), declared),
            **reports.provenance(wall),
        }
        (RESULTS / "distill_bounds.json").write_text(reports.dumps(confirmed))
        (RESULTS / "distill_bounds.md").write_text(confirmation_markdown(confirmed))
        log(f"wrote {RESULTS / 'distill_bounds'}.json and .md (pending: {confirmed['cells_pending'] or 'none'})")
        if plot(confirmed, RESULTS / f"{PLOT}.png"):
            index.list_files(RESULTS, {f"{PLOT}.png": "the results page's plot: the confirmation's complete cells, "
                                                      "each arm minus GRPO"})  # fmt: skip
            log(f"wrote {RESULTS / PLOT}.png and listed it in the manifest")
        report = {**report, "confirmation": confirmed}
    return report


if __name__ == "__main__":
    main()
