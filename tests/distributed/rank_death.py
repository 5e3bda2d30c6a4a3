"""`python -m gear_trl.train`, with one rank killing itself (SIGKILL) part way through a step, as a rank lost to the
OOM killer or a failed node would. Run by tests/distributed/test_rank_death.py through `accelerate launch`.

    GEAR_KILL=PHASE:STEP:RANK accelerate launch ... tests/distributed/rank_death.py --config RECIPE.yaml ...

PHASE is `generation` (inside a generate call), `teacher` (inside GEAR's teacher forward) or `backward` (inside the
loss's backward); STEP the optimizer step (1-based) during which rank RANK dies.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from trl import GRPOTrainer

from gear_trl import train
from gear_trl.teacher.teacher import Teacher
from gear_trl.trainer.gear_trainer import GEARTrainer


def die_here(trainer, phase: str) -> None:
    kill_phase, step, rank = os.environ["GEAR_KILL"].split(":")
    if phase == kill_phase and trainer.state.global_step == int(step) - 1 and dist.get_rank() == int(rank):
        print(f"[rank {rank}] killing myself during the {phase} of step {step} at {time.time():.3f}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)


CURRENT = []
"""The trainer whose step is running (set at its generation, which comes before its teacher pass)."""


def patch() -> None:
    generate = GRPOTrainer._generate_single_turn
    teacher = Teacher.hidden
    compute_loss = GEARTrainer.compute_loss

    def generating(self, *args, **kwargs):
        CURRENT[:] = [self]
        die_here(self, "generation")
        return generate(self, *args, **kwargs)

    def teaching(self, *args, **kwargs):
        die_here(CURRENT[0], "teacher")
        return teacher(self, *args, **kwargs)

    def losing(self, *args, **kwargs):
        loss = compute_loss(self, *args, **kwargs)
        if loss.requires_grad:
            loss.register_hook(lambda grad: die_here(self, "backward"))
        return loss

    GRPOTrainer._generate_single_turn = generating
    Teacher.hidden = teaching
    GEARTrainer.compute_loss = losing


if __name__ == "__main__":
    if os.environ.get("GEAR_KILL"):
        patch()
    train.cli(sys.argv[1:])
