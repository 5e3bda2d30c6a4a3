"""Stop on SIGINT / SIGTERM at the next optimizer step, with a checkpoint the next run resumes from.

Python's default handling (KeyboardInterrupt, or death by SIGTERM) stops a run wherever it is, saves nothing and
loses every step since the last checkpoint. `InterruptCallback` instead records the signal and, at the end of the
current optimizer step, asks the Trainer to save a checkpoint through its own `_save_checkpoint` (so the checkpoint
is exactly what `resume_from_checkpoint` reads) and to stop. `gear_trl.train` then exits with `EXIT_INTERRUPTED`.

Under several processes every rank must take the same decision at the same step, or one rank saves (a collective
under ZeRO) while another starts the next step. The ranks therefore agree on the flag with one all-reduce (max) per
optimizer step: a signal that reached only some ranks still stops all of them at the same step boundary.

Under `accelerate launch` (torch elastic) a Ctrl-C reaches the workers twice: from the terminal, and relayed by the
launcher, which then waits TORCH_ELASTIC_SHUTDOWN_TIMEOUT seconds (default 30) before killing them; a step plus a
save must fit in that time (raise it for large models). Repeats within `REPEAT_WINDOW_S` of the first signal are
therefore taken as that relay and ignored; a signal after that falls through to Python's default handling (stop at
once, nothing saved) for a user who will not wait.
"""

from __future__ import annotations

import signal
import time

from transformers import TrainerCallback

EXIT_INTERRUPTED = 75
"""Exit status of a run stopped by SIGINT/SIGTERM after saving its checkpoint (EX_TEMPFAIL: rerun to resume)."""

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
REPEAT_WINDOW_S = 5.0
"""A second signal this soon after the first is the launcher relaying it, not a user insisting."""


class InterruptCallback(TrainerCallback):
    """Turn SIGINT/SIGTERM into "save a checkpoint and stop" at the next optimizer-step boundary.

    After training, `signal_name` is the signal that stopped it (None if none did) and `step` the step saved.
    """

    def __init__(self, accelerator=None):
        self.accelerator = accelerator
        self.signal_name: str | None = None
        self.step: int | None = None
        self._received: int | None = None
        self._received_at = 0.0
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame):
        now = time.monotonic()
        if self._received is not None:
            if now - self._received_at < REPEAT_WINDOW_S:
                return
            # A user insisting: Python's default behaviour, stop now without the checkpoint.
            self._restore()
            signal.raise_signal(signum)
            return
        self._received, self._received_at = signum, now
        print(
            f"\n{signal.Signals(signum).name} received: saving a checkpoint at the end of this step, then stopping "
            f"(send it again after {REPEAT_WINDOW_S:.0f} s to stop at once without saving).",
            flush=True,
        )

    def on_train_begin(self, args, state, control, **kwargs):
        try:
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread: signals cannot be caught here, keep the defaults
            self._previous = {}

    def _restore(self):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _agreed_signal(self) -> int:
        """The received signal number (0 for none), the same on every rank."""
        received = self._received or 0
        if self.accelerator is None or self.accelerator.num_processes == 1:
            return received
        import torch

        flag = torch.tensor([received], device=self.accelerator.device)
        return int(self.accelerator.reduce(flag, reduction="max").item())

    def on_step_end(self, args, state, control, **kwargs):
        signum = self._agreed_signal()
        if signum:
            self.signal_name = signal.Signals(signum).name
            self.step = state.global_step
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._restore()
