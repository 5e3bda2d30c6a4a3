"""Helpers shared by the trainer tests: a tiny GEAR setup on the shipped model and data."""

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

from gear_trl import GEARConfig, GEARTrainer
from gear_trl.rewards import get_reward_funcs


def weighted(trainer, batch):
    """The batch as the loss sees it: with num_iterations=1 GEAR's weights are computed inside the loss's forward
    (the student's hidden states are read from it), so run the loss once."""
    if "gear_teacher_hidden" in batch:
        trainer.current_gradient_accumulation_steps = 1
        with torch.no_grad():
            trainer.compute_loss(trainer.model, batch)
    return batch


TINY = "data/tiny-qwen3"


def tiny_args(tmp_path, cls=GEARConfig, **overrides):
    base = {
        "output_dir": str(tmp_path / "out"),
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 16,
        "max_steps": 2,
        "learning_rate": 1e-3,
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "report_to": "none",
        "logging_steps": 1,
        "save_strategy": "no",
        "seed": 0,
        "beta": 0.0,
    }
    base.update(overrides)
    return cls(**base)


def math_rows(n=8, ground_truths=None):
    rows = []
    for i in range(n):
        truth = str(i + 2) if ground_truths is None else ground_truths[i % len(ground_truths)]
        rows.append({"prompt": [{"role": "user", "content": f"What is {i} + 2?"}], "ground_truth": truth})
    return Dataset.from_list(rows)


def digit_share(completions, **kwargs):
    """A reward a random tiny model varies on, so advantages (and gradients) are not all zero."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [sum(ch.isdigit() or ch == " " for ch in text) / max(len(text), 1) for text in texts]


def make_trainer(tmp_path, cls=GEARTrainer, args=None, dataset=None, model=None, reward_funcs=None, **kwargs):
    """The tiny trainer; `reward_funcs` default [accuracy, digit_share] (rows without `ground_truth` need others)."""
    return cls(
        model=model if model is not None else AutoModelForCausalLM.from_pretrained(TINY),
        reward_funcs=reward_funcs if reward_funcs is not None else [*get_reward_funcs(["accuracy"]), digit_share],
        args=args if args is not None else tiny_args(tmp_path),
        train_dataset=dataset if dataset is not None else math_rows(),
        processing_class=AutoTokenizer.from_pretrained(TINY),
        **kwargs,
    )


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(*args: str) -> list[str]:
    """The command that starts `args` (launcher options, then a script or `-m module` and its arguments) on two CPU
    ranks over gloo with torchrun, on a free port."""
    import sys

    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        *args,
    ]


def run_ranks(command: list[str], env: dict, timeout: float, what: str) -> str:
    """Run a multi-process launch; its output (stdout and stderr) on success. A non-zero exit fails the test, and so
    does a run past `timeout` seconds (a hang), after killing the launcher and every rank it started: it runs in a
    session of its own, so no orphaned rank outlives the test."""
    import os
    import signal
    import subprocess

    import pytest

    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{what}: the run did not finish within {timeout} s (a hang):\n{output[-3000:]}")
    assert process.returncode == 0, f"{what} failed:\n{output[-6000:]}"
    return output


def load_file(path, name: str):
    """Import a script that is not in a package (a bench study, a data script, the docs hooks) from its `path` as
    module `name`, registered in `sys.modules` (dataclasses look their module up while the file executes)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def assistant_loss_text(tokenizer, row: dict) -> tuple[list[int], list[int], str, str]:
    """Render a tool-use SFT row as SFTTrainer does for assistant-only loss (TRL's training chat template) and return
    (input ids, assistant mask, the text under the mask, the text the assistant turns should give: each call or answer
    after an empty think block, closed by `<|im_end|>`)."""
    import json

    from trl.chat_template_utils import get_training_chat_template

    rendered = tokenizer.apply_chat_template(
        row["messages"],
        tools=json.loads(row["tools"]),
        chat_template=get_training_chat_template(tokenizer),
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    ids, mask = rendered["input_ids"], rendered["assistant_masks"]
    masked = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    turns = []
    for message in row["messages"][1::2]:
        if message.get("tool_calls"):
            (call,) = message["tool_calls"]
            body = json.dumps({"name": call["function"]["name"], "arguments": call["function"]["arguments"]})
            turns.append(f"<think>\n\n</think>\n\n<tool_call>\n{body}\n</tool_call><|im_end|>\n")
        else:
            turns.append(f"<think>\n\n</think>\n\n{message['content']}<|im_end|>\n")
    return ids, mask, masked, "".join(turns)


def report_and_leave(trainer, mine: dict, report: str) -> None:
    """End of a two-rank script: gather every rank's `mine`, rank 0 writes them to `report` (JSON), and leave as
    gear_trl.train leaves a multi-process run (`leave_without_finalization`).

    Ranks enter teardown together: without the barrier rank 1 could destroy its process group while rank 0 still wrote
    the report. Leaving without interpreter finalization is what stops the rare abort at exit ("terminate called
    without an active exception", ~1 in 100 runs, seen in every two-rank script after the rank's work, once after the
    barrier); `leave_without_finalization` states its cause. These scripts test the ranks' work, which the report
    carries."""
    import json
    from pathlib import Path

    import torch.distributed as dist

    from gear_trl.train import leave_without_finalization

    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, mine)
    if dist.get_rank() == 0:
        Path(report).write_text(json.dumps(everyone))
    dist.barrier()
    trainer.accelerator.end_training()
    leave_without_finalization(0)


class StandInModel:
    """What `gear_trl.evaluate` asks of a model besides `generate`: a stand-in (an oracle, a fixed answer) subclasses
    it and writes only `generate(input_ids, attention_mask, generation_config)`."""

    training = False
    generation_config = None

    def eval(self):
        return self

    def train(self, mode=True):
        return self

    def parameters(self):
        yield torch.zeros(1)
