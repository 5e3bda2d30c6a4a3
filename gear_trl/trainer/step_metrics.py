"""Step metrics a GPU user reads first (issue 32): how much accelerator memory a step took, how many tokens a second
it made, and what share of it the teacher pass took. Logged with the trainer's other metrics, so they reach every
`report_to` tracker:

| key | value |
|---|---|
| `perf/peak_memory_gb` | CUDA: the most memory PyTorch's allocator held for tensors during the step (`torch.cuda.max_memory_allocated`, reset at each step), on the main process. CPU: the process's peak resident set size so far (`ru_maxrss`; it cannot be reset, so it never falls) |
| `perf/peak_memory_reserved_gb` | CUDA only: the most memory the allocator reserved (`max_memory_reserved`), closer to what `nvidia-smi` shows |
| `perf/step_seconds` | wall time of the optimizer step (generation, rewards, teacher pass, forward and backward, optimizer) |
| `perf/tokens_per_second` | prompt + completion tokens of every process processed in the step (TRL's `num_input_tokens_seen`), over its wall time |
| `perf/teacher_time_frac` | teacher modes: the teacher forward's wall time over the step's (CUDA synchronized around it) |

GEAR's cost over GRPO is that one teacher forward, hence its share. Nothing here adds a collective, so ranks stay in
lockstep whatever a rank measures.
"""

from __future__ import annotations

import contextlib
import resource
import sys
import time

import torch
from transformers import TrainerCallback

PEAK_MEMORY = "perf/peak_memory_gb"
PEAK_MEMORY_RESERVED = "perf/peak_memory_reserved_gb"
STEP_SECONDS = "perf/step_seconds"
TOKENS_PER_SECOND = "perf/tokens_per_second"
TEACHER_TIME_FRAC = "perf/teacher_time_frac"

_GB = 2**30


def _synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def peak_rss_gb() -> float:
    """The process's peak resident set size in GiB (`ru_maxrss` is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (_GB if sys.platform == "darwin" else 2**20)


class StepMetrics(TrainerCallback):
    """Times each optimizer step and the teacher passes inside it, and appends the `perf/` metrics to the trainer's
    `_metrics["train"]`, which TRL's `log` averages over `logging_steps` and hands to the trackers.

    The trainer times its teacher pass with `with self.step_metrics.teacher_pass(): ...`.
    """

    def __init__(self, trainer, logs_teacher: bool = True) -> None:
        self.trainer = trainer
        self.logs_teacher = logs_teacher
        self.teacher_seconds = 0.0
        self._start = None
        self._tokens_at_start = 0

    @contextlib.contextmanager
    def teacher_pass(self):
        """Add the wall time of the block to this step's teacher time (CUDA work finished on both sides, since
        kernels run asynchronously)."""
        _synchronize()
        start = time.perf_counter()
        try:
            yield
        finally:
            _synchronize()
            self.teacher_seconds += time.perf_counter() - start

    def on_step_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.reset_peak_memory_stats()
        self.teacher_seconds = 0.0
        self._tokens_at_start = state.num_input_tokens_seen
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._start is None:
            return
        seconds = time.perf_counter() - self._start
        self._start = None
        metrics = self.trainer._metrics["train"]
        metrics[STEP_SECONDS].append(seconds)
        tokens = state.num_input_tokens_seen - self._tokens_at_start
        metrics[TOKENS_PER_SECOND].append(tokens / seconds if seconds > 0 else 0.0)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            metrics[PEAK_MEMORY].append(torch.cuda.max_memory_allocated() / _GB)
            metrics[PEAK_MEMORY_RESERVED].append(torch.cuda.max_memory_reserved() / _GB)
        else:
            metrics[PEAK_MEMORY].append(peak_rss_gb())
        if self.logs_teacher:
            metrics[TEACHER_TIME_FRAC].append(min(self.teacher_seconds / seconds, 1.0) if seconds > 0 else 0.0)
