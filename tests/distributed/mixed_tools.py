"""Two ranks over gloo, one whose batch has rows with tool schemas and one whose batch has none (a dataset whose
`tools` column is set on some rows only). Each rank runs one generation + loss of the real GEARTrainer on its own
rows. Run by tests/trainer/test_trust_trainer.py through `accelerate launch`; writes a JSON report."""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from datasets import Dataset

from tests.utils import make_trainer, report_and_leave, tiny_args, weighted

TOOLS = json.dumps(
    [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers.",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                },
            },
        }
    ]
)


def rows(with_tools: bool) -> list[dict]:
    # One prompt repeated num_generations times: one GRPO group per rank.
    row = {"prompt": [{"role": "user", "content": "What is 3 + 2?"}], "ground_truth": "5"}
    return [{**row, "tools": TOOLS if with_tools else None} for _ in range(4)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--output_dir", required=True)
    known = parser.parse_args()

    dataset = Dataset.from_list(rows(True) + rows(False))
    trainer = make_trainer(
        Path(known.output_dir), args=tiny_args(Path(known.output_dir), use_cpu=False), dataset=dataset
    )
    rank = dist.get_rank()
    torch.manual_seed(rank)
    trainer.model.train()
    batch = weighted(trainer, trainer._generate_and_score_completions(copy.deepcopy(rows(rank == 0))))
    metrics = trainer._metrics["train"]
    mine = {
        "rank": rank,
        "turns_per_rollout": metrics["tools/turns_per_rollout"],
        "kl_mean": metrics["gear/kl_mean"],
        "advantages_shape": list(batch["advantages"].shape),
    }
    report_and_leave(trainer, mine, known.report)


if __name__ == "__main__":
    main()
