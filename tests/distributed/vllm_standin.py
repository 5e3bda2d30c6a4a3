"""GEAR on TRL's colocated vLLM path (the vLLM stand-in, importance-sampling correction on) under the launcher's
distributed engine, each batch's credit checked against the loss path's (tests/standin_credit.py). With `--tools`,
the tiny tool-use recipe, where rank 0's tool rollouts run two tool rounds and rank 1's one (`--rounds`): colocated
vLLM at tensor-parallel size 1 needs no lockstep, so the ranks make different numbers of generate calls. Run by
tests/testing/test_vllm_standin.py through `accelerate launch`; writes a JSON report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from transformers import AutoTokenizer

from gear_trl.testing.vllm_standin import colocated_vllm_standin
from tests.standin_credit import standin_trainer, tool_script
from tests.utils import report_and_leave


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--tools", action="store_true", help="script tool calls (the tool-use recipe)")
    parser.add_argument("--rounds", default="2,1", help="tool rounds of rank 0's and rank 1's tool rollouts")
    known, rest = parser.parse_known_args()

    rank = int(os.environ.get("RANK", "0"))
    rounds = [int(n) for n in known.rounds.split(",")][rank]
    script = tool_script(AutoTokenizer.from_pretrained("data/tiny-qwen3"), rounds) if known.tools else None
    with colocated_vllm_standin(script=script) as engines:
        trainer = standin_trainer(
            rest
        )  # the recipe and its overrides, as tests/testing/test_vllm_standin.py gives them
        trainer.train()
    mine = {
        "rank": dist.get_rank(),
        "step": trainer.state.global_step,
        "checks": trainer.checks,
        "engine_calls": engines[0].calls,
        "turns": [sum(m["role"] == "assistant" for m in c) for c in trainer._rollout.completions]
        if known.tools
        else [],
        "zero_stage": trainer.accelerator.state.deepspeed_plugin.zero_stage if trainer.is_deepspeed_enabled else 0,
    }
    report_and_leave(trainer, mine, known.report)


if __name__ == "__main__":
    main()
