"""How a rank of a multi-process run ends: a lost peer is told apart from a bug and named with the checkpoint to
resume from; a finished rank leaves without interpreter finalization, after its `atexit` handlers, flushed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch
import torch.distributed as dist
from safetensors.torch import save_file

from gear_trl.train import is_collective_failure, peer_lost_message

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLOO_RESET = (
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:9638: Connection "
    "reset by peer. This is typically caused by a remote worker hanging or bugs in the application."
)


def test_a_failed_collective_is_told_apart_from_a_bug():
    assert is_collective_failure(RuntimeError(GLOO_RESET))
    assert is_collective_failure(dist.DistBackendError("NCCL communicator was aborted"))
    assert not is_collective_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied (4x8 and 16x8)"))
    assert not is_collective_failure(ValueError("Connection reset"))


def test_the_peer_lost_line_names_the_last_complete_checkpoint(tmp_path):
    complete = tmp_path / "checkpoint-2"
    complete.mkdir()
    (complete / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    save_file({"w": torch.zeros(2)}, complete / "model.safetensors")
    (tmp_path / "checkpoint-4").mkdir()  # the save the dead rank interrupted
    message = peer_lost_message(str(tmp_path), 4, RuntimeError(GLOO_RESET))
    assert message.startswith("another rank stopped (died, was killed, or hangs) during step 5")
    assert "Connection reset by peer" in message and "\n" not in message
    assert f"the last complete checkpoint is {complete}; run the same command again to resume from it." in message
    empty = peer_lost_message(str(tmp_path / "nothing"), 0, RuntimeError(GLOO_RESET))
    assert "there is no complete checkpoint" in empty and "starts again from step 0" in empty


def test_a_finished_rank_leaves_with_its_status_after_atexit_handlers_and_flushed_output():
    code = (
        "import atexit\n"
        "from gear_trl.train import leave_without_finalization\n"
        "atexit.register(lambda: print('atexit handler ran'))\n"
        "print('work saved', end='')\n"
        "leave_without_finalization(3)\n"
        "print('not reached')\n"
    )
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "work savedatexit handler ran\n"
