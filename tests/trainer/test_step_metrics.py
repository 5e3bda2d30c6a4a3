"""Step metrics a GPU user reads (issue 32): peak memory, tokens per second and the teacher pass's share of the step
reach the trainer's log (and so every `report_to` tracker) with sane values; on CPU, memory is the process's peak RSS."""

from __future__ import annotations

import time
from collections import defaultdict
from types import SimpleNamespace

import pytest

from gear_trl.trainer.step_metrics import (
    PEAK_MEMORY,
    PEAK_MEMORY_RESERVED,
    STEP_SECONDS,
    TEACHER_TIME_FRAC,
    TOKENS_PER_SECOND,
    StepMetrics,
    peak_rss_gb,
)
from tests.utils import make_trainer, tiny_args


def run_step(metrics: StepMetrics, state, teacher_s: float, other_s: float, tokens: int) -> dict:
    metrics.on_step_begin(None, state, None)
    with metrics.teacher_pass():
        time.sleep(teacher_s)
    time.sleep(other_s)
    state.num_input_tokens_seen += tokens
    metrics.on_step_end(None, state, None)
    return metrics.trainer._metrics["train"]


def test_a_step_is_timed_and_its_teacher_share_measured():
    trainer = SimpleNamespace(_metrics={"train": defaultdict(list)})
    state = SimpleNamespace(num_input_tokens_seen=500)
    logged = run_step(StepMetrics(trainer), state, teacher_s=0.05, other_s=0.05, tokens=1000)
    (seconds,) = logged[STEP_SECONDS]
    assert 0.1 <= seconds < 1.0
    assert logged[TOKENS_PER_SECOND] == [pytest.approx(1000 / seconds)]
    (share,) = logged[TEACHER_TIME_FRAC]
    assert 0.3 < share < 0.6  # 0.05 s of ~0.1 s
    (peak,) = logged[PEAK_MEMORY]
    assert peak == pytest.approx(peak_rss_gb(), rel=0.05) and 0.01 < peak < 1024  # CPU: the process's peak RSS
    assert PEAK_MEMORY_RESERVED not in logged  # CUDA only


def test_the_teacher_time_restarts_each_step_and_baselines_log_no_share():
    trainer = SimpleNamespace(_metrics={"train": defaultdict(list)})
    state = SimpleNamespace(num_input_tokens_seen=0)
    metrics = StepMetrics(trainer)
    run_step(metrics, state, teacher_s=0.05, other_s=0.0, tokens=10)
    logged = run_step(metrics, state, teacher_s=0.0, other_s=0.05, tokens=10)
    assert logged[TEACHER_TIME_FRAC][0] > 0.5 and logged[TEACHER_TIME_FRAC][1] < 0.2
    baseline = SimpleNamespace(_metrics={"train": defaultdict(list)})
    logged = run_step(StepMetrics(baseline, logs_teacher=False), state, teacher_s=0.0, other_s=0.01, tokens=10)
    assert TEACHER_TIME_FRAC not in logged and len(logged[STEP_SECONDS]) == 1


@pytest.mark.slow
def test_gear_training_logs_the_step_metrics(tmp_path):
    """Two real GEAR steps on the tiny model: every logged step carries the perf/ keys, in the same dicts the trackers
    receive (the Trainer's log)."""
    trainer = make_trainer(tmp_path, args=tiny_args(tmp_path, credit="gear"))
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert len(logged) == 2
    for entry in logged:
        assert 0 < entry[STEP_SECONDS] < 600
        # 4 rows a step, each prompt (~20 tokens) + up to 16 completion tokens
        assert 0 < entry[TOKENS_PER_SECOND] * entry[STEP_SECONDS] <= 4 * 64
        assert 0 < entry[TEACHER_TIME_FRAC] < 1
        assert 0.05 < entry[PEAK_MEMORY] < 1024
    assert trainer.state.num_input_tokens_seen > 0
