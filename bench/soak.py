"""Soak: a long run of the tiny tool recipe with gradient checkpointing on, sampling resident memory, step time and
the input-embedding hook count at every optimizer step.

    OMP_NUM_THREADS=1 nice -n 15 python bench/soak.py --steps 300 --out bench/results/soak/soak.jsonl

The run is `recipes/tiny/config_calc_tools.yaml` (GEAR + GiGPO, the calculator environment) built with the entry
point's own functions (`gear_trl.train.parse_args`, `load_splits`, `build_trainer`), with `gradient_checkpointing:
true` and, so that 300 steps fit in a CPU session, a smaller batch (`--batch`, `--generations`) and completion budget
(`--max-completion-length`). Prints the median step time of the first and last 50 steps, the RSS slope (least squares
over the steps after the first 50, MB per 100 steps) and the hook counts at the first and last step: a leak or a
pile-up of hooks shows as a positive slope and a growing count.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import psutil
from transformers import TrainerCallback

from gear_trl.train import build_trainer, load_splits, parse_args


class Sampler(TrainerCallback):
    """One JSON line per optimizer step: step, seconds, RSS (MB), forward hooks on the input embeddings."""

    def __init__(self, path: str, trainer):
        self.path, self.trainer, self.rows = path, trainer, []
        self.process = psutil.Process()
        self.start = time.monotonic()

    def on_step_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        embeddings = self.trainer.model.get_input_embeddings()
        row = {
            "step": state.global_step,
            "seconds": round(time.monotonic() - self.start, 3),
            "rss_mb": round(self.process.memory_info().rss / 2**20, 1),
            "embedding_hooks": len(embeddings._forward_hooks),
        }
        self.rows.append(row)
        with open(self.path, "a") as handle:
            handle.write(json.dumps(row) + "\n")


def slope(xs: list[float], ys: list[float]) -> float:
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def summary(rows: list[dict]) -> str:
    first, last = rows[:50], rows[-50:]
    tail = rows[50:] or rows
    per_100 = 100 * slope([r["step"] for r in tail], [r["rss_mb"] for r in tail])
    return (
        f"{len(rows)} steps: median step {statistics.median(r['seconds'] for r in first):.2f} s (first 50) vs "
        f"{statistics.median(r['seconds'] for r in last):.2f} s (last 50); RSS {rows[0]['rss_mb']:.0f} -> "
        f"{rows[-1]['rss_mb']:.0f} MB (max {max(r['rss_mb'] for r in rows):.0f}), slope {per_100:+.1f} MB per 100 "
        f"steps after step 50; embedding hooks {rows[0]['embedding_hooks']} -> {rows[-1]['embedding_hooks']}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=8, help="per_device_train_batch_size (the recipe has 32)")
    parser.add_argument("--generations", type=int, default=4, help="num_generations (the recipe has 8)")
    parser.add_argument("--max-completion-length", type=int, default=128, help="the recipe has 256")
    parser.add_argument("--out", default="bench/results/soak/soak.jsonl")
    parser.add_argument("--output-dir", default="/tmp/gear_soak")
    args = parser.parse_args(argv)

    overrides = ["--config", "recipes/tiny/config_calc_tools.yaml", "--gradient_checkpointing", "true"]
    overrides += ["--max_steps", str(args.steps), "--per_device_train_batch_size", str(args.batch)]
    overrides += [
        "--num_generations",
        str(args.generations),
        "--max_completion_length",
        str(args.max_completion_length),
    ]
    overrides += ["--save_strategy", "no", "--logging_steps", "50", "--output_dir", args.output_dir]
    overrides += ["--eval_strategy", "no"]
    script_args, training_args, model_args = parse_args(overrides)
    train, _ = load_splits(script_args, training_args)
    trainer = build_trainer(script_args, training_args, model_args, train)
    if os.path.exists(args.out):
        os.remove(args.out)
    sampler = Sampler(args.out, trainer)
    trainer.add_callback(sampler)
    trainer.train()
    print(summary(sampler.rows), flush=True)


if __name__ == "__main__":
    main()
