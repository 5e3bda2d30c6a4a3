"""Which `checkpoint-N` folder a run can resume from.

A run killed while the Trainer writes a checkpoint leaves a folder that `transformers.trainer_utils.get_last_checkpoint`
still picks (it only looks at the folder name), and every rerun then fails on it. `find_resumable_checkpoint` walks
the folders newest first and returns the first *complete* one, with the reason each newer one was skipped.

A checkpoint is complete when

- `trainer_state.json` is present and parses as JSON with a `global_step`;
- the model weights are present and whole: `model.safetensors` / `adapter_model.safetensors` (safetensors header
  parsed and the file as long as the header says), or every shard of a `*.safetensors.index.json`, or a
  `pytorch_model.bin` / `adapter_model.bin` torch zip archive whose central directory reads; under DeepSpeed the
  `global_stepN` folder named by `latest` holds model-state files and they stand in for the weights;
- every optimizer, scheduler, scaler and RNG-state file the Trainer wrote is a readable torch zip archive (a file cut
  short loses the zip's directory, which sits at its end).

These are header reads: no tensor is loaded.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import re
import struct
import zipfile

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
_SAFETENSORS = ("model.safetensors", "adapter_model.safetensors")
_SAFETENSORS_INDEX = ("model.safetensors.index.json", "adapter_model.safetensors.index.json")
_TORCH_WEIGHTS = ("pytorch_model.bin", "adapter_model.bin")
_TORCH_STATE = ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pth")


def safetensors_problem(path: str) -> str | None:
    """Why the safetensors file at `path` is not whole (None when it is): its header must parse and the file must be
    exactly as long as the tensors the header lists."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                return f"{os.path.basename(path)} is {size} bytes, shorter than a safetensors header"
            (header_len,) = struct.unpack("<Q", head)
            if 8 + header_len > size:
                return f"{os.path.basename(path)} is truncated (its header alone needs {8 + header_len} bytes)"
            header = json.loads(handle.read(header_len))
    except (OSError, ValueError) as err:
        return f"{os.path.basename(path)} cannot be read ({err})"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + header_len + max(ends, default=0)
    if size < expected:
        return f"{os.path.basename(path)} is truncated ({size} of {expected} bytes)"
    return None


def _torch_zip_problem(path: str) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            archive.namelist()
    except (OSError, zipfile.BadZipFile) as err:
        return f"{os.path.basename(path)} is not a whole torch archive ({err})"
    return None


def _deepspeed_problem(checkpoint: str) -> str | None:
    """Why the DeepSpeed engine state in `checkpoint` cannot be resumed from (None when it can)."""
    latest = os.path.join(checkpoint, "latest")
    if not os.path.isfile(latest):
        return "it has global_step* folders but no DeepSpeed `latest` file"
    with open(latest) as handle:
        tag = handle.read().strip()
    folder = os.path.join(checkpoint, tag)
    states = sorted(glob.glob(os.path.join(folder, "*model_states.pt")))
    if not states:
        return f"DeepSpeed folder {tag!r} (named by `latest`) holds no *model_states.pt"
    for path in states + sorted(glob.glob(os.path.join(folder, "*optim_states.pt"))):
        problem = _torch_zip_problem(path)
        if problem:
            return f"DeepSpeed {tag}/{problem}"
    return None


def checkpoint_problem(checkpoint: str) -> str | None:
    """Why `checkpoint` cannot be resumed from, in words; None when it is complete (see the module docstring)."""
    state = os.path.join(checkpoint, "trainer_state.json")
    if not os.path.isfile(state):
        return "trainer_state.json is missing"
    try:
        with open(state) as handle:
            global_step = json.load(handle)["global_step"]
        int(global_step)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return f"trainer_state.json cannot be read ({type(err).__name__}: {err})"

    deepspeed = bool(glob.glob(os.path.join(checkpoint, "global_step*")))
    if deepspeed:
        problem = _deepspeed_problem(checkpoint)
        if problem:
            return problem

    weights_found = False
    for name in _SAFETENSORS:
        path = os.path.join(checkpoint, name)
        if os.path.isfile(path):
            weights_found = True
            problem = safetensors_problem(path)
            if problem:
                return problem
    for name in _SAFETENSORS_INDEX:
        path = os.path.join(checkpoint, name)
        if os.path.isfile(path):
            weights_found = True
            try:
                with open(path) as handle:
                    shards = sorted(set(json.load(handle)["weight_map"].values()))
            except (OSError, ValueError, KeyError) as err:
                return f"{name} cannot be read ({err})"
            for shard in shards:
                shard_path = os.path.join(checkpoint, shard)
                if not os.path.isfile(shard_path):
                    return f"shard {shard} listed in {name} is missing"
                problem = safetensors_problem(shard_path)
                if problem:
                    return problem
    for name in _TORCH_WEIGHTS:
        path = os.path.join(checkpoint, name)
        if os.path.isfile(path):
            weights_found = True
            problem = _torch_zip_problem(path)
            if problem:
                return problem
    if not weights_found and not deepspeed:
        return "it holds no model weights (model.safetensors, adapter_model.safetensors, ...)"

    teacher = os.path.join(checkpoint, "gear_teacher.safetensors")  # `teacher: ema`'s average (gear_trl/teacher/weights.py)
    if os.path.isfile(teacher):
        problem = safetensors_problem(teacher)
        if problem:
            return problem

    for path in [os.path.join(checkpoint, name) for name in _TORCH_STATE] + sorted(
        glob.glob(os.path.join(checkpoint, "rng_state_*.pth"))
    ):
        if os.path.isfile(path):
            problem = _torch_zip_problem(path)
            if problem:
                return problem
    return None


def find_resumable_checkpoint(output_dir: str) -> tuple[str | None, list[tuple[str, str]]]:
    """(newest complete `checkpoint-N` in `output_dir` or None, [(skipped newer checkpoint, why), ...])."""
    if not os.path.isdir(output_dir):
        return None, []
    numbered = []
    for name in os.listdir(output_dir):
        match = _CHECKPOINT.match(name)
        if match and os.path.isdir(os.path.join(output_dir, name)):
            numbered.append((int(match.group(1)), os.path.join(output_dir, name)))
    skipped = []
    for _, path in sorted(numbered, reverse=True):
        problem = checkpoint_problem(path)
        if problem is None:
            return path, skipped
        skipped.append((path, problem))
    return None, skipped


class CheckpointSaveError(OSError):
    """Writing a checkpoint failed (a full disk, an I/O error); the message names the folder, the cause and the
    newest complete checkpoint, which the failed save left as it was."""


_IO_FAILURE_WORDS = ("No space left", "StorageFull", "Input/output error", "file write failed", "Disk quota")


def io_failure_cause(err: BaseException) -> str | None:
    """The cause in words when `err` is an I/O failure of a write (`OSError`, or the RuntimeError / SafetensorError
    that torch's and safetensors' writers turn one into); None for any other exception."""
    if isinstance(err, OSError):
        code = errno.errorcode.get(err.errno or 0)
        return f"{err.strerror or err} ({code})" if code else str(err)
    text = str(err)
    if any(word in text for word in _IO_FAILURE_WORDS):
        return text.splitlines()[0] if text else type(err).__name__
    return None


def save_failure_message(folder: str, cause: str, output_dir: str) -> str:
    """One line: which save failed and why, the newest complete checkpoint and how to resume from it."""
    complete, _ = find_resumable_checkpoint(output_dir)
    if complete is not None and os.path.abspath(complete) == os.path.abspath(folder):
        complete = None  # only a failure after the last file (a push, the rotation) leaves the folder complete
    kept = (
        f"the newest complete checkpoint, {complete}, is untouched; free space and run the same command again to "
        "resume from it"
        if complete
        else "there is no complete checkpoint to resume from; free space and run the same command again"
    )
    return f"Saving checkpoint {folder} failed: {cause}. It is incomplete (a rerun skips it); {kept}."
