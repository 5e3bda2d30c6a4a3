"""`python -m gear_trl.evaluate` (the `gear-trl-evaluate` console script): evaluate a saved model or LoRA adapter on a
dataset split or a benchmark preset, scored with the task's own reward.

    python -m gear_trl.evaluate --model outputs/tiny-gear-math --dataset data/math/generic --split test --output report.json
    python -m gear_trl.evaluate --model outputs/run --benchmark aime24

The evaluation itself is the package `gear_trl.evaluation`: its command line (`gear_trl.evaluation.cli`, every option
documented there and in docs/evaluation.md), the loops (`loops`: `evaluate`, `evaluate_multi_turn`;
`conversations`: `evaluate_bfcl_multi_turn`, `evaluate_interactive`), pass@k (`pass_at_k`), the benchmark presets,
generation backends and simulated users.
"""

from __future__ import annotations

import sys

from .evaluation.cli import cli, main

__all__ = ["cli", "main"]

if __name__ == "__main__":
    cli(sys.argv[1:])
