"""Two ranks whose rollouts need different numbers of tool rounds (rank 0: 3, rank 1: 1), under the launcher's
distributed engine. Run by tests/distributed/test_distributed.py through `accelerate launch`; writes a JSON report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trl import GRPOTrainer

from tests.scripted import call_text, scripted_trainer
from tests.utils import report_and_leave

RECIPE = "recipes/tiny/config_tool_use.yaml"
ROUNDS = {0: 3, 1: 1}


def script(row, round_index, rollout_index, rank):
    return call_text("ls") if round_index < ROUNDS[rank] else "Done."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--no-lockstep", action="store_true", help="TRL's own tool loop (expected to hang)")
    known, rest = parser.parse_known_args()

    generate_calls = [0]
    real_single_turn = GRPOTrainer._generate_single_turn

    def counting(self, *a, **k):
        generate_calls[0] += 1
        return real_single_turn(self, *a, **k)

    GRPOTrainer._generate_single_turn = counting
    attributes = {"real_generate": True}
    if known.no_lockstep:
        attributes["_tool_call_loop"] = GRPOTrainer._tool_call_loop
    trainer = scripted_trainer(script, ["--config", RECIPE, *rest], **attributes)
    trainer.train()
    rank = dist.get_rank()
    turns = [sum(m["role"] == "assistant" for m in c) for c in trainer._rollout.completions]
    mine = {"rank": rank, "generate_calls": generate_calls[0], "turns": turns, "step": trainer.state.global_step}
    report_and_leave(trainer, mine, known.report)


if __name__ == "__main__":
    main()
