"""CreditReportCallback on a real two-step GEAR run: HTML and PNG per report, and the report in TensorBoard."""

from __future__ import annotations

import glob
import os
import sys
import types
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoTokenizer

from gear_trl.trainer.callbacks import CreditReportCallback
from gear_trl.trainer.gear_trainer import CreditTrace
from tests.utils import TINY, make_trainer, tiny_args


@pytest.mark.slow
def test_two_step_run_writes_credit_reports_and_logs_them_to_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = tiny_args(
        tmp_path,
        output_dir=str(tmp_path / "run"),
        max_completion_length=12,
        report_to="tensorboard",
        onset_threshold=0.05,
        credit_report_steps=1,
        credit_report_rollouts=2,
    )
    trainer = make_trainer(tmp_path, args=args)
    if not any(isinstance(c, CreditReportCallback) for c in trainer.callback_handler.callbacks):
        trainer.add_callback(CreditReportCallback(trainer))
    trainer.train()

    credit = tmp_path / "run" / "credit"
    assert sorted(os.listdir(credit)) == ["step_00001.html", "step_00001.png", "step_00002.html", "step_00002.png"]
    page = (credit / "step_00002.html").read_text()
    assert page.count('<section class="rollout">') == 2 and "data-weight" in page
    assert (credit / "step_00002.png").stat().st_size > 1000
    assert getattr(trainer, "last_credit_trace", None) is None  # cleared after each report

    events = glob.glob(str(tmp_path / "run" / "**" / "events.out.tfevents*"), recursive=True)
    assert events
    tags = {"images": set(), "tensors": set()}
    for path in events:
        accumulator = EventAccumulator(path, size_guidance={"images": 0, "tensors": 0})
        accumulator.Reload()
        for kind in tags:
            tags[kind] |= set(accumulator.Tags().get(kind, []))
    assert "credit/tokens" in tags["images"]
    assert any(tag.startswith("credit/rollouts") for tag in tags["tensors"])  # add_text is stored as a tensor


def hand_made_trace(tokenizer, rows=3):
    ids = torch.tensor([tokenizer("So the answer is \\boxed{5}.")["input_ids"]] * rows)
    shape = ids.shape
    weights = torch.linspace(0.6, 1.4, shape[1]).repeat(rows, 1)
    return CreditTrace(
        completion_ids=ids,
        mask=torch.ones(shape, dtype=torch.bool),
        kl=torch.rand(shape),
        entropy=torch.rand(shape),
        signal=torch.rand(shape),
        segment_ids=torch.tensor([[-1, 0, 0] + [-1] * (shape[1] - 3)] * rows),
        weights=weights,
        advantages=0.5 * weights,
        has_ground_truth=torch.ones(rows, dtype=torch.bool),
    )


class Recorder:
    """A stand-in for wandb / trackio that records what is logged."""

    def __init__(self, name):
        self.module = types.ModuleType(name)
        self.logged = []
        self.module.run = object()
        self.module.Table = lambda columns, data: ("table", columns, data)
        self.module.Image = lambda path: ("image", path)
        self.module.log = lambda logs, **kwargs: self.logged.append((logs, kwargs))


def test_report_goes_to_wandb_and_trackio_from_the_main_process_only(tmp_path, monkeypatch):
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    recorders = {name: Recorder(name) for name in ("wandb", "trackio")}
    for name, recorder in recorders.items():
        monkeypatch.setitem(sys.modules, name, recorder.module)
    trainer = SimpleNamespace(_tokenizer=tokenizer, last_credit_trace=hand_made_trace(tokenizer))
    args = SimpleNamespace(output_dir=str(tmp_path), report_to=["wandb", "trackio"], credit_report_rollouts=2,
                           credit="gear")  # fmt: skip
    callback = CreditReportCallback(trainer)

    worker = SimpleNamespace(global_step=7, is_world_process_zero=False)
    callback.on_step_end(args, worker, None)
    assert trainer.last_credit_trace is None and not (tmp_path / "credit").exists()

    trainer.last_credit_trace = hand_made_trace(tokenizer)
    callback.on_step_end(args, SimpleNamespace(global_step=7, is_world_process_zero=True), None)
    assert trainer.last_credit_trace is None
    assert sorted(os.listdir(tmp_path / "credit")) == ["step_00007.html", "step_00007.png"]
    for name, recorder in recorders.items():
        ((logs, _),) = recorder.logged
        kind, columns, data = logs["credit/rollouts"]
        assert kind == "table" and columns[:3] == ["step", "rollout", "text"]
        assert len(data) == 2 and data[0][0] == 7 and "boxed" in data[0][2]
        assert data[0][columns.index("onsets")] == 1 and data[0][columns.index("advantage")] == pytest.approx(0.5)
        assert logs["credit/tokens"] == ("image", str(tmp_path / "credit" / "step_00007.png"))


def mixed_trace(tokenizer):
    """Four rollouts, two prompts in shuffled order: prompt A's (rows 0 and 2) are all alike (advantage 0), prompt
    B's (rows 1 and 3) mix a pass (+1) and a fail (-1)."""
    trace = hand_made_trace(tokenizer, rows=4)
    signs = torch.tensor([0.0, -1.0, 0.0, 1.0])[:, None]
    trace.advantages = signs * trace.weights
    prompts = torch.tensor([[1, 2], [3, 4], [1, 2], [3, 4]])
    return trace, prompts


@pytest.mark.parametrize("choice", ["mixed", "first"])
def test_a_report_shows_a_passed_and_a_failed_rollout_of_one_prompt_by_default(tmp_path, choice):
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    trace, prompts = mixed_trace(tokenizer)
    trainer = SimpleNamespace(_tokenizer=tokenizer, last_credit_trace=trace, last_credit_prompt_ids=prompts)
    args = SimpleNamespace(output_dir=str(tmp_path), report_to=[], credit_report_rollouts=2, credit="gear",
                           credit_report_choice=choice)  # fmt: skip
    CreditReportCallback(trainer).on_step_end(args, SimpleNamespace(global_step=3, is_world_process_zero=True), None)
    page = (tmp_path / "credit" / "step_00003.html").read_text()
    if choice == "mixed":  # prompt B's pass, then its fail
        assert page.index("advantage +1.000") < page.index("advantage -1.000")
        assert page.count("prompt 1: 1 of 2 above the group&#39;s mean, 1 below") == 2
    else:  # the first two rows: prompt A's rollout (no mix), then prompt B's fail
        assert "prompt 0: no mix, all 2 alike (advantage 0)" in page
        assert "advantage -1.000" in page and "advantage +1.000" not in page


def test_the_training_report_says_what_each_rows_teacher_saw_through_trls_shuffle(tmp_path):
    """Each reported rollout names the reference its teacher was shown, carried in the batch with its row through
    TRL's shuffle and split of the generation batch (two steps per generation here)."""
    import re

    args = tiny_args(
        tmp_path,
        output_dir=str(tmp_path / "run"),
        max_completion_length=8,
        max_steps=2,
        gradient_accumulation_steps=2,  # a generation batch of 8 rows, shuffled and split over two steps
        credit_report_steps=1,
        credit_report_rollouts=4,
        credit_report_choice="first",
    )
    trainer = make_trainer(tmp_path, args=args)
    if not any(isinstance(c, CreditReportCallback) for c in trainer.callback_handler.callbacks):
        trainer.add_callback(CreditReportCallback(trainer))
    trainer.train()
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    prompts = tokenizer.batch_decode(trainer.last_credit_prompt_ids, skip_special_tokens=True)
    shown = trainer.last_credit_references
    assert len(shown) == len(prompts) == 4
    for prompt, (kind, reference) in zip(prompts, shown, strict=True):
        i = int(re.search(r"What is (\d+) \+ 2\?", prompt).group(1))
        assert (kind, reference) == ("ground truth", str(i + 2))  # the row's own, not a shuffled neighbour's
    page = (tmp_path / "run" / "credit" / "step_00002.html").read_text()
    assert page.count("the teacher saw: ground truth") == 4
