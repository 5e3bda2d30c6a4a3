"""Print what `make demo` did, for a person: GRPO and a GEAR setting trained side by side from the same warm start
and seed, their held-out accuracy before and after, both training-reward curves in one PNG, and what the study's
paired seeds say about the same two arms (so one seed's figures are read for what they are).

python recipes/tiny/compare_summary.py outputs/demo/eval_start.json \
    --arm GRPO outputs/demo/grpo outputs/demo/eval_grpo.json \
    --arm GEAR outputs/demo/gear outputs/demo/eval_gear.json \
    --study bench/results/horizon/horizon.json --study bench/results/horizon/replication_distill_0.25_seeds_32_to_47/horizon.json \
    --study-cell independent 8 --study-arm gear-distill-0.25 --plot outputs/demo/reward.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# recipes/tiny is not a package; this script shares demo_summary's functions, from the same folder, also when loaded
# by path (the tests), and the studies' paired t-interval and final window from the bench harness (bench.harness)
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]
import demo_summary

from bench.harness import runs, stats


def arm_lines(name: str, start: dict, end: dict, history: list[tuple[int, float]]) -> list[str]:
    """Two lines for one arm: held-out accuracy start -> end, and its training reward's first and final window."""
    if not history:
        raise ValueError(f"{name}: the run logged no reward.")
    window = runs.final_window(len(history))  # the study's final window
    rewards = [reward for _, reward in history]
    first, last = sum(rewards[:window]) / window, sum(rewards[-window:]) / window
    return [
        f"{name}: {demo_summary.summary(start, end)}",
        f"{name}: training reward, mean of the first and last {window} logged steps: {first:.3f} -> {last:.3f}",
    ]


def plot_curves(histories: dict[str, list[tuple[int, float]]], path: Path) -> Path:
    """Every arm's training reward per logged step in one small line plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.5, 3.0), dpi=100)
    for name, history in histories.items():
        steps, rewards = zip(*history, strict=True)
        axis.plot(steps, rewards, marker="o", markersize=2, linewidth=1, label=name)
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("mean training reward")
    axis.set_title("same warm start, same seed", fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def study_line(studies: list[dict], variant: str, k: str, arm: str) -> str:
    """The studies' paired figures for `arm` against GRPO (`none`) at one cell: held-out and final-window reward
    differences with 95% t-intervals over the seeds of every report given (each report's own seeds; a seed found in
    two reports is refused), from the committed reports. Raises KeyError naming what a report lacks."""
    values: dict[str, list[float]] = {"sampled_accuracy": [], "reward_last": []}
    seen: set[int] = set()
    for study in studies:
        cells = study.get("variants", {})
        if variant not in cells or k not in cells[variant]:
            raise KeyError(f"the study report has no cell {variant} K = {k}")
        arms = cells[variant][k]["arms"]
        if arm not in arms:
            raise KeyError(f"the study report has no arm {arm!r} at {variant} K = {k} (it has {sorted(arms)})")
        seeds = set(study.get("config", {}).get("budget", {}).get("seeds", []))
        if seeds & seen:
            raise ValueError(
                f"two study reports share seeds {sorted(seeds & seen)}: pooling them would count a run twice"
            )
        seen |= seeds
        for metric in values:
            values[metric] += arms[arm][f"{metric}_minus_none"]["values"]
    pooled = {metric: stats.paired_interval(v) for metric, v in values.items()}

    def figure(metric: str) -> str:
        value = pooled[metric]
        return f"{value['mean']:+.3f} [{value['ci_low']:+.3f}, {value['ci_high']:+.3f}]"

    n = pooled["sampled_accuracy"]["n_seeds"]
    return (
        f"the study ({variant}, K = {k}, `{arm}` - GRPO, paired over {n} seeds, 95% t-intervals): held-out "
        f"{figure('sampled_accuracy')}, final-window training reward {figure('reward_last')}; "
        f"one seed's difference above is one draw from that spread"
    )


def report_lines(
    start: dict, arms: list[tuple[str, Path, dict]], plot: Path | None = None, credit_dir: Path | None = None
) -> list[str]:
    lines, histories = [], {}
    for name, run_dir, end in arms:
        histories[name] = demo_summary.reward_history(run_dir)
        lines += arm_lines(name, start, end, histories[name])
    if len(arms) == 2:
        (a, _, end_a), (b, _, end_b) = arms
        lines.append(
            f"{b} - {a}, held-out accuracy at the end (this seed): {end_b['accuracy'] - end_a['accuracy']:+.3f}"
        )
    if plot is not None:
        lines.append(f"both training-reward curves: {plot_curves(histories, plot)}")
    if credit_dir is not None:
        lines.append(f"{arms[-1][0]}: {demo_summary.credit_line(credit_dir)}")
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("start", help="evaluate report of the warm start (JSON)")
    parser.add_argument("--arm", nargs=3, action="append", required=True, metavar=("NAME", "RUN_DIR", "END_JSON"),
                        help="an arm's name, its training output_dir and the evaluate report of its trained model")  # fmt: skip
    parser.add_argument("--plot", type=Path, default=None, help="where to write the curves' PNG")
    parser.add_argument("--credit", type=Path, default=None, help="gear_trl.inspect_credit's --out folder (last arm)")
    parser.add_argument("--study", type=Path, action="append", default=[],
                        help="a bench/horizon.py report (JSON); repeatable: the reports' seeds are pooled")  # fmt: skip
    parser.add_argument("--study-cell", nargs=2, metavar=("VARIANT", "K"), default=("independent", "8"))
    parser.add_argument("--study-arm", default=None, help="the study's arm the GEAR run matches")
    args = parser.parse_args(argv)
    start = json.loads(Path(args.start).read_text())
    arms = [(name, Path(run), json.loads(Path(end).read_text())) for name, run, end in args.arm]
    lines = report_lines(start, arms, args.plot, args.credit)
    if args.study and args.study_arm:
        studies = [json.loads(path.read_text()) for path in args.study]
        lines.append(study_line(studies, *args.study_cell, args.study_arm))
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
