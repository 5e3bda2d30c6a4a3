"""Two ranks holding different numbers of distinct teacher prompts (rank 0: one, rank 1: two) under the launcher's
distributed engine, with teacher prefix sharing on, where rank 0's batch takes the full pass and rank 1's shares (as
ranks whose prompts differ may decide). Run by tests/distributed/test_distributed.py through `accelerate launch`; writes a JSON
report: per rank, the distinct prompts, whether the pass shared, the backbone forwards it made (its own and the
one-token forwards that match the other rank's count), and how far its states are from the full pass's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from datasets import Dataset

from gear_trl import GEARConfig, GEARTrainer
from gear_trl.rewards import get_reward_funcs
from gear_trl.teacher.teacher import Teacher
from tests.utils import report_and_leave

# With shuffling off, per-device batch 2, two steps per generation and two generations per prompt, rank 0 gets rows
# 0, 0, 1, 1 (the same prompt twice: one distinct teacher prompt) and rank 1 rows 2, 2, 3, 3 (two).
PROMPTS = ["What is 3 + 4?", "What is 3 + 4?", "What is 10 + 5?", "Add 6 and 1, then double it."]
TRUTHS = ["7", "7", "15", "14"]


class CountingHost:
    """The trainer as the teacher's host, with its two forwards wrapped by `counted`."""

    def __init__(self, host, counted):
        self._host = host
        self.backbone_states = counted(host.backbone_states)
        self.final_hidden = counted(host.final_hidden)

    def __getattr__(self, name):
        return getattr(self._host, name)


class Recording(Teacher):
    report: list

    def hidden(self, output, teacher_prompt_ids):
        host = self.host
        calls = [0]

        def counted(forward):
            def counting(*args, **kwargs):
                calls[0] += 1
                return forward(*args, **kwargs)

            return counting

        # the teacher's forwards, counted: a backbone forward of its own or one through the trainer's final_hidden
        self.host = CountingHost(host, counted)
        try:
            shared = super().hidden(output, teacher_prompt_ids)
            did_share = self.pass_shared
        finally:
            self.host = host
        host.args.teacher_prefix_sharing = False
        try:
            full = super().hidden(output, teacher_prompt_ids)
        finally:
            host.args.teacher_prefix_sharing = True
        mask = output["completion_mask"].bool()
        self.report.append(
            {
                "distinct": len({tuple(ids) for ids in teacher_prompt_ids}),
                "shared": did_share,
                "forwards": calls[0],
                "max_diff": float((shared - full)[mask].abs().max()),
            }
        )
        self.pass_shared = did_share
        return shared


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--report", required=True)
    parser.add_argument("--output_dir", required=True)
    known = parser.parse_args()

    rows = [{"prompt": [{"role": "user", "content": p}], "ground_truth": t} for p, t in zip(PROMPTS, TRUTHS)]
    args = GEARConfig(
        output_dir=known.output_dir,
        per_device_train_batch_size=2,
        steps_per_generation=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=1,
        shuffle_dataset=False,
        learning_rate=1e-4,
        beta=0.0,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        seed=0,
    )
    Recording.report = []
    trainer = GEARTrainer(
        model="data/tiny-qwen3",
        reward_funcs=get_reward_funcs(["accuracy"]),
        args=args,
        train_dataset=Dataset.from_list(rows),
    )
    trainer.teacher.__class__ = Recording  # the same teacher, its pass recorded
    # rank 0: share only if it removed every token (never); rank 1: share whatever it saves
    trainer.args.teacher_prefix_sharing_max_ratio = 1e-9 if dist.get_rank() == 0 else 1.0
    trainer.train()
    mine = {"rank": dist.get_rank(), "step": trainer.state.global_step, "passes": Recording.report}
    report_and_leave(trainer, mine, known.report)


if __name__ == "__main__":
    main()
