"""A rank killed (SIGKILL) part way through a step of a two-rank ZeRO-3 run on CPU: the survivor does not hang, it
exits non-zero at once with one line saying that a peer stopped and where the last complete checkpoint is; the
launcher exits non-zero; the same command resumes from that checkpoint and ends with the weights of a run that was
never interrupted. `bench/`-style figures (the time from the kill to the launcher's exit) are printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.distributed.test_distributed import HERE, extensions_dir
from tests.utils import free_port, run_ranks

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

TIMEOUT_S = 420
"""A launch still running after this long is a hang (killed with all its ranks, and the test fails)."""


def command(out: Path) -> list[str]:
    return [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(HERE / "zero3_cpu.yaml"),
        "--main_process_port", str(free_port()), str(HERE / "rank_death.py"),
        "--config", "recipes/tiny/config_math.yaml", "--output_dir", str(out), "--max_steps", "4",
        "--save_steps", "2", "--save_total_limit", "1", "--max_completion_length", "8",
    ]  # fmt: skip


def environment(**extra: str) -> dict:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", DS_ACCELERATOR="cpu", TORCH_EXTENSIONS_DIR=extensions_dir(), OMP_NUM_THREADS="1")
    env.update(TRL_EXPERIMENTAL_SILENCE="1", **extra)
    return env


def killed_run(out: Path, phase: str) -> tuple[subprocess.CompletedProcess, float]:
    """Launch with rank 1 dying during `phase` of step 3; (the finished launch, seconds from the kill to the
    launcher's exit)."""
    proc = subprocess.run(
        command(out), env=environment(GEAR_KILL=f"{phase}:3:1"), capture_output=True, text=True,
        timeout=TIMEOUT_S, check=False, start_new_session=True,
    )  # fmt: skip
    ended = time.time()
    killed = re.search(r"killing myself during the \w+ of step 3 at ([0-9.]+)", proc.stdout + proc.stderr)
    return proc, ended - float(killed.group(1)) if killed else float("nan")


def weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


@pytest.mark.parametrize("phase", ["generation", "teacher", "backward"])
def test_a_rank_killed_mid_step_stops_the_run_with_where_to_resume(tmp_path, phase):
    out = tmp_path / "run"
    proc, seconds = killed_run(out, phase)
    text = proc.stdout + proc.stderr
    assert f"killing myself during the {phase} of step 3" in text
    assert proc.returncode != 0, text[-3000:]
    line = re.search(r"error: another rank stopped .* during step 3, so this rank stops too: .*", text)
    assert line, text[-4000:]
    assert f"the last complete checkpoint is {out / 'checkpoint-2'}; run the same command again" in line.group(0)
    assert "terminate called" not in text
    print(f"\n{phase}: the launcher exited with status {proc.returncode} {seconds:.1f} s after the kill")


def test_the_same_command_resumes_and_matches_an_uninterrupted_run(tmp_path):
    out = tmp_path / "run"
    proc, _ = killed_run(out, "generation")
    assert proc.returncode != 0 and (out / "checkpoint-2").is_dir(), (proc.stdout + proc.stderr)[-3000:]
    assert not (out / "model.safetensors").exists()

    resumed = run_ranks(command(out), environment(), TIMEOUT_S, "rerun")
    assert f"Resuming from {out / 'checkpoint-2'}" in resumed
    reference = tmp_path / "reference"
    run_ranks(command(reference), environment(), TIMEOUT_S, "uninterrupted run")
    got, expected = weights(out), weights(reference)
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0, msg=name)
