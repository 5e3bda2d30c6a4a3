"""A save that the disk refuses part way (ENOSPC, EIO): the run stops with one line naming the folder and the cause,
the previous complete checkpoint is untouched (`save_total_limit` never rotates it away first), and the same command
resumes from it once the disk has room."""

from __future__ import annotations

import errno
import hashlib
import json
import os

import pytest

from gear_trl import train as train_cli
from gear_trl.trainer.checkpoints import checkpoint_problem, io_failure_cause
from gear_trl.trainer.gear_trainer import GEARTrainer

RECIPE = "recipes/tiny/config_math.yaml"


def digest(folder) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_save_failing_part_way_stops_with_one_line_and_the_rerun_resumes(tmp_path, monkeypatch, capsys, code):
    out = tmp_path / "run"
    argv = ["--config", RECIPE, "--output_dir", str(out), "--max_steps", "4", "--save_steps", "2"]
    argv += ["--save_total_limit", "1", "--max_completion_length", "8"]
    real_save = GEARTrainer._save_optimizer_and_scheduler
    kept = {}

    def full_disk(self, output_dir):
        if self.state.global_step < 4:
            real_save(self, output_dir)
            return
        kept.update(digest(out / "checkpoint-2"))
        # the weights are written; the optimizer state is cut short by the disk
        (out / "checkpoint-4" / "optimizer.pt").write_bytes(b"PK\x03\x04" + b"\0" * 100)
        raise OSError(code, os.strerror(code), str(out / "checkpoint-4" / "optimizer.pt"))

    monkeypatch.setattr(GEARTrainer, "_save_optimizer_and_scheduler", full_disk)
    with pytest.raises(SystemExit) as stopped:
        train_cli.cli(argv)
    message = str(stopped.value.code)
    name = errno.errorcode[code]
    assert message.startswith(f"error: Saving checkpoint {out / 'checkpoint-4'} failed: {os.strerror(code)} ({name})")
    assert f"the newest complete checkpoint, {out / 'checkpoint-2'}, is untouched" in message
    assert "\n" not in message
    assert digest(out / "checkpoint-2") == kept and checkpoint_problem(str(out / "checkpoint-2")) is None
    assert checkpoint_problem(str(out / "checkpoint-4")) is not None

    monkeypatch.setattr(GEARTrainer, "_save_optimizer_and_scheduler", real_save)  # space freed
    capsys.readouterr()
    train_cli.cli(argv)
    printed = capsys.readouterr().out
    assert f"Resuming from {out / 'checkpoint-2'}" in printed
    assert f"Skipping incomplete checkpoint {out / 'checkpoint-4'}" in printed
    assert json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())["global_step"] == 4
    assert checkpoint_problem(str(out / "checkpoint-4")) is None
    assert not (out / "checkpoint-2").exists()  # rotated away only now that checkpoint-4 is complete


def test_io_failures_from_torch_and_safetensors_writers_are_recognised():
    torch_error = RuntimeError(
        "[enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file data/0: file write failed"
    )
    assert "file write failed" in io_failure_cause(torch_error)
    assert "StorageFull" in io_failure_cause(
        Exception("Error while serializing: IoError(Os { code: 28, kind: StorageFull })")
    )
    assert io_failure_cause(OSError(errno.ENOSPC, "No space left on device")) == "No space left on device (ENOSPC)"
    assert io_failure_cause(RuntimeError("CUDA out of memory")) is None
    assert io_failure_cause(KeyError("x")) is None
