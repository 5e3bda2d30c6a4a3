"""Which bound or gate stops self-distillation's collapse on the tool task without losing its gain on many
independent decisions? Issue 73 item 1's stage-1 exploration (bench/results/distill_bounds/PLAN.md): GRPO + the 0.5
distillation blend with one option each, on seeds 0-7 of the credit-methods study's `calculator` and `independent-k8`
cells, over that study's harness (same recipes, same run spec, same held-out scoring).

    python -m bench.distill_bounds --cell calculator        # stage 1's runs of a cell, seed-major, resumable
    python -m bench.distill_bounds --report-only            # distill_bounds_stage1.json / .md from the kept runs

Exploration only: seed-paired differences with 95% t-intervals, no Holm, nothing declared. Every finished run is
kept at once under `runs/<cell>/<arm>__seed<N>.json` in this folder (the cache across sessions); a control the
credit-methods study already ran with the same spec on these seeds is read from its folder instead of trained again.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from bench import credit_methods as cm
from bench.harness import REPO_ROOT, jobs, reports, results_dir, stats

RESULTS = results_dir("distill_bounds")
RUNS_DIR = RESULTS / "runs"
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
ARMS = {
    "none": cm.ARMS["none"],
    BLEND: cm.ARMS[BLEND],
    **{name: {"credit": "none", "reference": True, "set": ["--distillation_weight", "0.5", *extra]}
       for name, extra in VARIANTS.items()},
}  # fmt: skip
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


def collect() -> dict[str, list[dict]]:
    return cm.kept_runs(RUNS_DIR)


def main(argv: list[str] | None = None, log=print) -> dict:
    parser = jobs.study_parser(__doc__, CELLS, list(ARMS), study="distill_bounds", arms_default="all of stage 1's",
                               seeds_default="stage 1's, 0-7")  # fmt: skip
    args = parser.parse_args(argv)
    seeds = args.seeds or list(STAGE1_SEEDS)
    stray = [s for s in seeds if s not in cm.EXPLORATION]
    if stray:
        parser.error(f"seeds {stray} are not exploration seeds (0-47); the confirmation needs its declaration first")
    wall = time.perf_counter()
    if not args.report_only:
        if not args.cell:
            parser.error("name the cells to run with --cell")
        work_root = Path(args.work_dir or REPO_ROOT / "outputs" / "distill_bounds")
        planned = [job_for(cell, arm, seed, work_root) for cell in args.cell for seed in seeds
                   for arm in (args.arms or ARMS)]  # fmt: skip
        jobs.run_jobs(planned, args.workers, False, log, dispatch=cm.dispatch, cached=cached)
    report = {
        "title": "Bounded and gated self-distillation, stage 1 (exploration): each arm minus GRPO, paired by seed",
        "what": "Issue 73 item 1, PLAN.md's stage 1: seeds 0-7, 95% t-intervals, no correction; exploration only.",
        "plan": "bench/results/distill_bounds/PLAN.md",
        "seeds": sorted(STAGE1_SEEDS),
        "window": WINDOW,
        "rule": {"margin": MARGIN, "keep": KEEP, "share_limit": SHARE_LIMIT},
        "runs": {cell: len(r) for cell, r in collect().items()},
        **stage1(collect()),
        **reports.provenance(wall),
    }
    (RESULTS / "distill_bounds_stage1.json").write_text(json.dumps(report, indent=1) + "\n")
    (RESULTS / "distill_bounds_stage1.md").write_text(markdown(report))
    log(f"wrote {RESULTS / 'distill_bounds_stage1'}.json and .md ({report['runs']})")
    return report


if __name__ == "__main__":
    main()
