"""Two ranks whose rollouts need different numbers of tool rounds (rank 0: 3, rank 1: 1), under the launcher's
distributed engine. Run by tests/test_distributed.py through `accelerate launch`; writes a JSON report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trl import GRPOTrainer

from gear_trl.envs import BFCLEnvironment
from gear_trl.rewards import get_reward_funcs
from gear_trl.train import load_splits, parse_args
from tests.scripted import ScriptedTrainer, call_text

ROUNDS = {0: 3, 1: 1}


def script(row, round_index, rollout_index, rank):
    return call_text("ls") if round_index < ROUNDS[rank] else "Done."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--no-lockstep", action="store_true", help="TRL's own tool loop (expected to hang)")
    known, rest = parser.parse_known_args()
    script_args, args, model_args = parse_args(["--config", "recipes/tiny/config_tool_use.yaml", *rest])

    generate_calls = [0]
    real_single_turn = GRPOTrainer._generate_single_turn

    def counting(self, *a, **k):
        generate_calls[0] += 1
        return real_single_turn(self, *a, **k)

    GRPOTrainer._generate_single_turn = counting
    attributes = {"script": staticmethod(script), "real_generate": True}
    if known.no_lockstep:
        attributes["_tool_call_loop"] = GRPOTrainer._tool_call_loop
    trainer_cls = type("Scripted", (ScriptedTrainer,), attributes)
    train, _ = load_splits(script_args, args)
    trainer = trainer_cls(
        model=model_args.model_name_or_path,
        reward_funcs=get_reward_funcs(script_args.reward_funcs),
        args=args,
        train_dataset=train,
        environment_factory=BFCLEnvironment,
    )
    trainer.train()
    rank = dist.get_rank()
    turns = [sum(m["role"] == "assistant" for m in c) for c in trainer._rollout.completions]
    mine = {"rank": rank, "generate_calls": generate_calls[0], "turns": turns, "step": trainer.state.global_step}
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if rank == 0:
        Path(known.report).write_text(json.dumps(everyone))
    trainer.accelerator.end_training()  # as gear_trl.train does: no abort at exit


if __name__ == "__main__":
    main()
