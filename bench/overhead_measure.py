"""How bench/overhead.py measures a step: memory monitors (extra peak over a window's start), the step recorder
(phase times and extra peaks) and the wrappers that time the trainers' methods as phases."""

from __future__ import annotations

import contextlib
import functools
import importlib
import resource
import threading
import time
from collections import defaultdict

# ---------------------------------------------------------------------------------------------------------------------
# Memory: extra peak over a window's start, nested windows (a phase inside the step)


class _Window:
    __slots__ = ("peak", "start")

    def __init__(self, start: int):
        self.start = start
        self.peak = start


def _malloc_in_use():
    """A function returning the bytes currently allocated through glibc's malloc (in-use heap chunks + mmapped
    blocks, summed over arenas), or None off glibc. Unlike the RSS it does not keep freed heap memory, so a phase that
    reuses memory freed by an earlier one still shows its own peak; and it needs no malloc tuning that would change
    the timings."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    mallinfo2.restype = MallInfo2

    def in_use() -> int:
        info = mallinfo2()
        return info.uordblks + info.hblkhd

    return in_use


class HostMonitor:
    """Host memory sampled by a background thread (~1 kHz); every open window keeps the largest value seen. Reads
    glibc's malloc statistics (see `_malloc_in_use`), else the process RSS (psutil)."""

    def __init__(self, interval: float = 1e-3):
        self.read = _malloc_in_use()
        self.method = "bytes allocated through glibc malloc (mallinfo2: in-use heap + mmapped blocks)"
        if self.read is None:
            import psutil

            process = psutil.Process()
            self.read = lambda: process.memory_info().rss
            self.method = "process RSS (psutil)"
        self.method += f", sampled every {interval * 1e3:g} ms by a thread and at every phase boundary"
        self._interval = interval
        self._windows: list[_Window] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # The sampler runs only while a window is open: mallinfo2 locks every malloc arena, so sampling between
        # windows would slow whatever runs then (GiGPO's timing: its many small allocations wait on those locks).
        self._open = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> int:
        value = self.read()
        with self._lock:
            for window in self._windows:
                window.peak = max(window.peak, value)
        return value

    def _run(self):
        while not self._stop.is_set():
            self._open.wait()
            self._sample()
            time.sleep(self._interval)

    def open(self) -> _Window:
        window = _Window(self.read())
        with self._lock:
            self._windows.append(window)
            self._open.set()
        return window

    def close(self, window: _Window) -> None:
        self._sample()
        with self._lock:
            self._windows.remove(window)
            if not self._windows:
                self._open.clear()

    def shutdown(self):
        self._stop.set()
        self._open.set()
        self._thread.join()


class CUDAMonitor:
    """Allocated CUDA memory. The allocator keeps one peak counter, so it is folded into every open window and reset
    at each boundary; that lets a phase window sit inside the step window."""

    method = "torch.cuda.max_memory_allocated, peak counter folded and reset at every phase boundary"

    def __init__(self):
        import torch

        self._cuda = torch.cuda
        self._windows: list[_Window] = []

    def _fold(self):
        peak = self._cuda.max_memory_allocated()
        for window in self._windows:
            window.peak = max(window.peak, peak)
        self._cuda.reset_peak_memory_stats()

    def open(self) -> _Window:
        self._cuda.synchronize()
        self._fold()
        window = _Window(self._cuda.memory_allocated())
        self._windows.append(window)
        return window

    def close(self, window: _Window) -> None:
        self._cuda.synchronize()
        self._fold()
        self._windows.remove(window)

    def shutdown(self):
        pass


# ---------------------------------------------------------------------------------------------------------------------
# Step recorder: phase times and extra peaks; the method wrappers report to whichever recorder is active


_ACTIVE: StepRecorder | None = None


# This thread's CPU time and page faults (the memory monitor's thread is left out), where the OS reports them per thread.
_RUSAGE_WHO = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


def _cpu_now() -> tuple[float, float, int]:
    usage = resource.getrusage(_RUSAGE_WHO)
    return usage.ru_utime, usage.ru_stime, usage.ru_minflt


class StepRecorder:
    """Times, extra peaks and CPU use of one step (`step()`) and of the phases inside it (`phase(name)`). `cpu`: the
    step's user and system CPU seconds and minor page faults: on CPU much of a step can be the kernel zeroing pages
    of freshly allocated tiles, which the wall time alone does not show."""

    def __init__(self, monitor, sync):
        self.monitor = monitor
        self.sync = sync
        self.stack: list[str] = []

    @contextlib.contextmanager
    def step(self):
        global _ACTIVE
        self.times = defaultdict(float)
        self.extra = {}
        self.local = {}
        self.inside = defaultdict(set)  # phase -> the phases it ran inside
        self.cpu = {}
        self.sync()
        self.step_window = self.monitor.open()
        cpu_start = _cpu_now()
        start = time.perf_counter()
        _ACTIVE = self
        try:
            yield self
        finally:
            _ACTIVE = None
            self.sync()
            self.times["step"] = time.perf_counter() - start
            user, system, faults = (b - a for a, b in zip(cpu_start, _cpu_now()))
            self.cpu = {"user_s": user, "system_s": system, "minor_faults": faults}
            self.monitor.close(self.step_window)
            self.extra["step"] = self.step_window.peak - self.step_window.start

    @contextlib.contextmanager
    def phase(self, name: str):
        self.sync()
        window = self.monitor.open()
        self.inside[name].update(self.stack)
        self.stack.append(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.sync()
            self.times[name] += time.perf_counter() - start
            self.stack.pop()
            self.monitor.close(window)
            self.extra[name] = max(self.extra.get(name, 0), window.peak - self.step_window.start)
            self.local[name] = max(self.local.get(name, 0), window.peak - window.start)


def _wrap(owner, attr: str, phase, *, skip_inside: tuple[str, ...] = ()):
    """Replace `owner.attr` (an instance's method or a module's function) by a version timed as `phase`: a name, a
    tuple of names (nested phases), or a callable returning either or None (this call is not timed). A phase already
    open is not reopened (its time is not counted twice). Missing attributes are left alone, so the benchmark keeps
    running while gear_trl's internals change."""
    original = getattr(owner, attr, None)
    if original is None or getattr(original, "_bench_wrapped", False):
        return

    @functools.wraps(original)
    def timed(*args, **kwargs):
        recorder = _ACTIVE
        names = phase() if callable(phase) else phase
        if recorder is None or names is None or any(s in recorder.stack for s in skip_inside):
            return original(*args, **kwargs)
        names = (names,) if isinstance(names, str) else names
        with contextlib.ExitStack() as stack:
            for name in names:
                if name not in recorder.stack:
                    stack.enter_context(recorder.phase(name))
            return original(*args, **kwargs)

    timed._bench_wrapped = True
    setattr(owner, attr, timed)


def _loss_forward() -> bool:
    return _ACTIVE is not None and "loss" in _ACTIVE.stack


def _no_grad_only(name):
    import torch

    return lambda: None if torch.is_grad_enabled() else name


def _instrument_gear_module():
    """GEAR's pure functions, looked up by the trainer module at call time."""
    try:
        import gear_trl.trainer.gear_trainer as gear_module
    except ImportError:  # a gear_trl from before the trainer layer became a package (--gear-src)
        import gear_trl.trainer as gear_module

    _wrap(gear_module, "reverse_kl_and_entropy", ("teacher", "teacher_lm_head"))
    # The forward of the loss's LM head, TRL's or (GEAR, gear_trl.trainer.fused_head) TRL's plus the divergence: one
    # phase name, so GRPO's and GEAR's compare. Only the projection with gradients (the loss's) is timed.
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    functions = [ChunkedLogProbFunction]
    for path in (
        "gear_trl.trainer.fused_head",
        "gear_trl.fused_head",
    ):  # a --gear-src from before the move: the latter
        try:
            functions.append(importlib.import_module(path)._LogProbsWithDivergence)
            break
        except (ImportError, AttributeError):  # or from before the fused head: neither
            pass
    for function in functions:
        _wrap(function, "forward", lambda: "lm_head_forward" if _loss_forward() else None)
    _wrap(gear_module, "segment_signal", "segments")
    _wrap(gear_module, "weights_from_signal", "weights")


def _instrument(trainer, kind: str):
    _wrap(trainer, "_calculate_rewards", "rewards")
    if kind == "sdpo":
        _wrap(trainer, "_generate", "generate")
        _wrap(trainer.teacher_context_builder, "build", "teacher_prompts")
        _wrap(trainer, "_compute_rollout_logps", "old_logps")
        # The teacher forward is the no-grad `_forward_logits` call inside compute_loss.
        _wrap(trainer, "_forward_logits", _no_grad_only("teacher"), skip_inside=("old_logps",))
        _wrap(trainer, "_compute_self_distillation_loss", "distill_loss")
        return
    _wrap(trainer, "_generate_single_turn", "generate")
    # GRPO's own no-grad pass (num_iterations > 1); the loss's pass runs with grad.
    _wrap(trainer, "_get_per_token_logps_and_entropies", _no_grad_only("old_logps"), skip_inside=("teacher",))
    if kind == "gear":
        # "teacher" is GEAR's whole divergence pass: the student and teacher backbones (as many as the trainer runs)
        # and the LM head over chunks. Names of the trainer at 8a24c5d (`_divergence`) and of later versions.
        for method in ("_divergence", "_teacher_hidden", "_student_hidden_pass"):
            _wrap(trainer, method, "teacher")
        _wrap(trainer, "_final_hidden", ("teacher", "teacher_backbone"))
        _wrap(trainer, "_backbone_states", ("teacher", "teacher_backbone"))
        _wrap(trainer, "_teacher_prompts", "teacher_prompts")
        teacher = getattr(trainer, "teacher", None)  # gear_trl/teacher/teacher.py, after the teacher got its module
        if teacher is not None:
            _wrap(teacher, "hidden", "teacher")
            _wrap(teacher, "prompts", "teacher_prompts")
