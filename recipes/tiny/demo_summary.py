"""Print what `make demo-tools` did, for a person: held-out accuracy before and after, the training reward curve (as a
small PNG), and where the credit report and the trained model are.

python recipes/tiny/demo_summary.py outputs/demo_tools/eval_start.json outputs/demo_tools/eval_end.json \
    --run outputs/demo_tools --credit outputs/demo_tools/credit
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


def summary(start: dict, end: dict) -> str:
    for key in ("dataset", "split", "n", "num_samples", "temperature", "seed", "limit"):
        a, b = (report.get(key, report.get("config", {}).get(key)) for report in (start, end))
        if a != b:  # the two figures are only comparable on the same problems, decoded the same way
            raise ValueError(f"The two reports differ in {key!r}: {a!r} and {b!r}.")
    temperature = start.get("config", {}).get("temperature", 0.0)
    decoding = "greedy" if not temperature else f"sampled (temperature {temperature:g})"
    what = f"{start['n']} {start['split']} problems of {start['dataset']}"
    if start.get("num_samples", 1) > 1:
        what += f" x {start['num_samples']} samples"
    return (
        f"held-out {decoding} accuracy ({what}): start {start['accuracy']:.3f} -> end {end['accuracy']:.3f} "
        f"({end['accuracy'] - start['accuracy']:+.3f})"
    )


def reward_history(run_dir: Path) -> list[tuple[int, float]]:
    """(step, mean training reward) of every logged step, from the newest checkpoint's `trainer_state.json` (the
    Trainer saves one at the last step). Raises FileNotFoundError when the run left no checkpoint."""
    checkpoints = [p for p in run_dir.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    states = [p / "trainer_state.json" for p in checkpoints if (p / "trainer_state.json").is_file()]
    if not states:
        raise FileNotFoundError(f"No checkpoint with a trainer_state.json in {run_dir}: did the training run finish?")
    newest = max(states, key=lambda path: int(path.parent.name.split("-")[1]))
    history = json.loads(newest.read_text())["log_history"]
    return [(entry["step"], float(entry["reward"])) for entry in history if "reward" in entry and "step" in entry]


def window_means(history: list[tuple[int, float]], window: int = 5) -> tuple[float, float, int]:
    """Mean reward of the first and of the last `window` logged steps (fewer when the run logged fewer)."""
    if not history:
        raise ValueError("The run logged no reward.")
    window = max(1, min(window, len(history) // 2 or 1))
    rewards = [reward for _, reward in history]
    return sum(rewards[:window]) / window, sum(rewards[-window:]) / window, window


def plot_rewards(history: list[tuple[int, float]], path: Path) -> Path:
    """A small line plot of the training reward per logged step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(4.5, 2.6), dpi=100)
    steps, rewards = zip(*history, strict=True)
    axis.plot(steps, rewards, marker="o", markersize=3)
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("mean reward")
    axis.set_title("training reward (GEAR + GiGPO)", fontsize=10)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def credit_line(credit_dir: Path) -> str:
    """Where gear_trl.inspect_credit put its credit report (and its picture) in `credit_dir`."""
    reports = sorted(credit_dir.glob("credit_*.html"))
    if not reports:
        raise FileNotFoundError(f"No credit report (credit_*.html) in {credit_dir}.")
    pngs = sorted(credit_dir.glob("credit_*.png"))
    also = f" (picture: {pngs[0]})" if pngs else ""
    return f"per-token credit of rollouts from the trained model: {reports[0]}{also}"


def report_lines(start: dict, end: dict, run_dir: Path | None = None, credit_dir: Path | None = None) -> list[str]:
    lines = [summary(start, end)]
    if run_dir is not None:
        history = reward_history(run_dir)
        first, last, window = window_means(history)
        png = plot_rewards(history, run_dir / "reward.png")
        lines.append(
            f"training reward, mean of the first and last {window} steps (a few prompts a step, so noisy): "
            f"{first:.3f} -> {last:.3f}; curve: {png}"
        )
    if credit_dir is not None:
        lines.append(credit_line(credit_dir))
    if run_dir is not None:
        lines.append(f"trained model and its model card: {run_dir}/ ({run_dir / 'README.md'})")
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("start", help="evaluate report of the starting model (JSON)")
    parser.add_argument("end", help="evaluate report of the trained model (JSON)")
    parser.add_argument("--run", type=Path, default=None, help="the training run's output_dir (reward curve)")
    parser.add_argument("--credit", type=Path, default=None, help="gear_trl.inspect_credit's --out folder")
    args = parser.parse_args(argv)
    start, end = (json.loads(Path(path).read_text()) for path in (args.start, args.end))
    lines = report_lines(start, end, args.run, args.credit)
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
