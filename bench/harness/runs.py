"""One run and one score, each in its own worker process: train a (credit mode, seed) from a recipe, save the policy
and score it on a held-out split (`train_one`), or score a starting checkpoint (`eval_start`), as a user would with
`gear_trl.train` and `gear_trl.evaluate`.

A job is a dict (`bench.harness.jobs` runs and caches them). The fields a result is cached on are `job_spec`'s.
A job with an `oracle` trains under a label oracle registered as a credit mode in the worker process
(`bench.harness.oracles.credit_of`); its `mode` (the cached spec) stays the arm's GEAR mode.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from . import REPO_ROOT

SAMPLES = 2
"""Sampled completions per held-out prompt."""


def final_window(max_steps: int) -> int:
    """How many of a run's last steps its final-window figures average: the last quarter, at least one."""
    return max(1, max_steps // 4)


def recipe_values_sha(recipe: dict) -> str:
    """The cache key of a recipe's values (not its text: a reworded comment must not throw away cached runs)."""
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def run_key(label: str, seed: int) -> str:
    """A run's folder name in a study's work dir: its arm label made path-safe, and its seed."""
    slug = "".join(c if c.isalnum() or c in "_-." else "_" for c in label.replace("+", "_plus_"))
    return f"{slug}__seed{seed}"


def parse_arm(text: str) -> tuple[str, str, list[str]]:
    """`MODE` or `MODE:KEY=VALUE,KEY=VALUE` -> (label, credit mode, recipe overrides as CLI arguments)."""
    mode, _, settings = text.partition(":")
    overrides = []
    for item in filter(None, settings.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(
                f"A variant's settings are KEY=VALUE pairs separated by commas; got {item!r} in {text!r}."
            )
        overrides += [f"--{key.strip()}", value.strip()]
    return (f"{mode} {settings}" if settings else mode), mode, overrides


def job_spec(job: dict) -> dict:
    """What a cached result must have been made with to be reused."""
    keys = (
        ("model", "eval_limit", "train_eval")
        if job["kind"] == "start"
        else ("recipe", "recipe_sha", "mode", "seed", "max_steps", "overrides", "eval_limit", "train_eval")
    )
    return {key: job[key] for key in keys}


def credit_of(job: dict) -> str:
    """The `--credit` a job's trainer runs with: its `mode` (by its current name, where the job names a mode by an
    earlier release's spelling), or, for a job with an `oracle`, the credit mode that oracle is registered as in this
    process (`bench.harness.oracles`)."""
    from gear_trl.credit.modes import RENAMED

    mode = RENAMED.get(job["mode"], job["mode"])  # a committed study's arm under a mode's earlier spelling
    if not job.get("oracle"):
        return mode
    from . import oracles

    return oracles.register(job["oracle"], mode, job.get("error_site"), job.get("oracle_options"))


def _log_series(log_history: list[dict], key: str) -> list[float | None]:
    return [entry.get(key) for entry in log_history if "reward" in entry]


def evaluate_model(model_dir: str, spec: dict, *, temperature: float, num_samples: int, limit, output: str) -> dict:
    """Score a saved model on the task's held-out split with `python -m gear_trl.evaluate`, in this process."""
    from gear_trl.evaluate import main as evaluate_main

    argv = [
        "--model", model_dir,
        "--dataset", spec["dataset"],
        "--split", spec["split"],
        "--dataset_format", spec["dataset_format"],
        "--max_new_tokens", str(spec["max_new_tokens"]),
        "--batch_size", "50",
        "--temperature", str(temperature),
        "--num_samples", str(num_samples),
        "--device", "cpu",
        "--seed", "0",
        "--output", output,
        "--no_progress",
    ]  # fmt: skip
    if limit:
        argv += ["--limit", str(limit)]
    if spec.get("prompt_template"):  # the training recipe's user message, not the math default
        argv += ["--prompt_template", spec["prompt_template"]]
    if spec.get("reward"):  # a task scored by a reward other than the dataset format's own
        argv += ["--reward", spec["reward"]]
    if spec.get("environment"):  # multi-turn tool rollouts, tools executed
        argv += ["--environment", spec["environment"]]
        argv += ["--max_tool_calling_iterations", str(spec["max_tool_calling_iterations"])]
    report = evaluate_main(argv)
    return {key: report.get(key) for key in ("n", "num_samples", "accuracy", "mean_reward", "pass_at_k")}


def held_out(model_dir: str, job: dict, out_dir: Path) -> dict:
    """Greedy accuracy and the accuracy of `SAMPLES` samples per prompt at the training temperature on the held-out
    split; with `train_eval`, greedy accuracy on the problems trained on as well. A `blind` job (a declared study's
    confirmatory run, `bench.harness.jobs.run_jobs`) prints no score: evaluation's summary lines go to `eval.log` in
    `out_dir` instead of the worker's output, which the study's progress log shares."""
    if not job.get("blind"):
        return _held_out(model_dir, job, out_dir)
    import contextlib

    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "eval.log", "w", encoding="utf-8") as log, contextlib.redirect_stdout(log):
        return _held_out(model_dir, job, out_dir)


def _held_out(model_dir: str, job: dict, out_dir: Path) -> dict:
    spec, limit = job["eval"], job["eval_limit"]
    greedy = evaluate_model(
        model_dir, spec, temperature=0.0, num_samples=1, limit=limit, output=str(out_dir / "greedy.json")
    )
    sampled = evaluate_model(
        model_dir,
        spec,
        temperature=job["temperature"],
        num_samples=SAMPLES,
        limit=limit,
        output=str(out_dir / "sampled.json"),
    )
    scores = {
        "n": greedy["n"],
        "greedy_accuracy": greedy["accuracy"],
        "sampled_accuracy": sampled["accuracy"],
        "pass_at_k": sampled["pass_at_k"],
    }
    if job.get("train_eval"):
        train_spec = {**spec, "split": job["train_eval"]["split"]}
        trained = evaluate_model(
            model_dir,
            train_spec,
            temperature=0.0,
            num_samples=1,
            limit=job["train_eval"]["limit"],
            output=str(out_dir / "train_greedy.json"),
        )
        scores.update(train_n=trained["n"], train_greedy_accuracy=trained["accuracy"])
    return scores


def worker_setup() -> None:
    """A worker process's settings: offline, one torch thread, quiet transformers, the repository as cwd."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    torch.set_num_threads(1)
    os.chdir(REPO_ROOT)
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def train_argv(job: dict, run_dir: Path, credit: str) -> list[str]:
    """`gear_trl.train`'s arguments for one run of `job` into `run_dir` (no checkpoints, no trackers, every step
    logged), the job's recipe overrides last."""
    return [
        "--config", job["recipe"],
        "--credit", credit,
        "--seed", str(job["seed"]),
        "--max_steps", str(job["max_steps"]),
        "--output_dir", str(run_dir / "train"),
        "--save_strategy", "no",
        "--report_to", "none",
        "--logging_steps", "1",
        "--push_to_hub", "false",
        "--disable_tqdm", "true",
        *job["overrides"],
    ]  # fmt: skip


def run_record(job: dict, trainer, train_s: float, history: list[dict], series: dict[str, str]) -> dict:
    """A finished run's result: what it was (label, mode, seed, spec), its steps and time, and each of `series`
    (result name -> logged metric) over its logged steps."""
    return {
        "label": job.get("label", job["mode"]),
        "mode": job["mode"],
        "seed": job["seed"],
        "spec": job_spec(job),
        "steps": trainer.state.global_step,
        "train_s": round(train_s, 1),
        **{name: _log_series(history, key) for name, key in series.items()},
    }


def score_and_keep(result: dict, model_dir: str, job: dict, run_dir: Path) -> dict:
    """Score the saved policy on the held-out split into `result` and write it as the job's cached result."""
    start = time.perf_counter()
    result["eval"] = held_out(model_dir, job, run_dir)
    result["eval_s"] = round(time.perf_counter() - start, 1)
    (run_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result


GEAR_SERIES = {
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "weight_std": "gear/weight_std",
    "onset_rate": "gear/onset_rate",
    "segment_len_mean": "gear/segment_len_mean",
    "kl_mean": "gear/kl_mean",
    # the label-free diagnostics (bench/teacher_sweep.py compares them with label-based localization)
    "kl_failed_over_passed": "gear/kl_failed_over_passed",
    "onsets_in_failed_frac": "gear/onsets_in_failed_frac",
    "kl_floor": "gear/kl_floor",
    "onsets_teacher_supported_frac": "gear/onsets_teacher_supported_frac",
    "gigpo_step_adv_std": "gigpo/step_adv_std",
    "distill_share": "gear/distill_share",  # with distillation_weight; else None
    # the collapse monitor's inputs and its weight in force (issue 73; with distillation_weight, else None)
    "entropy": "entropy",
    "distill_weight": "gear/distill_weight",
    "collapse_warning": "gear/collapse_warning",
    "completion_length": "completions/mean_length",
}
"""The series a GEARTrainer run keeps (result name -> logged metric)."""


def train_one(job: dict) -> dict:
    """Train one (mode, seed) from the recipe, save the policy, score it on the held-out split."""
    worker_setup()
    from gear_trl.train import build_trainer, load_splits, parse_args

    run_dir = Path(job["work_dir"]) / job["key"]
    run_dir.mkdir(parents=True, exist_ok=True)
    script_args, training_args, model_args = parse_args(train_argv(job, run_dir, credit_of(job)))
    train_dataset, _ = load_splits(script_args, training_args)
    start = time.perf_counter()
    trainer = build_trainer(script_args, training_args, model_args, train_dataset)
    trainer.train()
    train_s = time.perf_counter() - start
    model_dir = str(run_dir / "model")
    trainer.save_model(model_dir)
    result = run_record(job, trainer, train_s, trainer.state.log_history, GEAR_SERIES)
    del trainer
    return score_and_keep(result, model_dir, job, run_dir)


def eval_start(job: dict) -> dict:
    """Score the starting checkpoint (step 0) on the held-out split."""
    worker_setup()
    out_dir = Path(job["work_dir"]) / "start"
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {
        "model": job["model"],
        "spec": job_spec(job),
        "eval": held_out(job["model"], job, out_dir),
    }
    (out_dir / "result.json").write_text(json.dumps(result, indent=1))
    return result


def build_probe_trainer(job: dict, out_dir: Path, credit: str | None = None):
    """A trainer on the held-out split of `job["eval"]`, for `gear_trl.inspect_credit.sample_credit` (the studies' probes):
    the job's recipe and overrides, `credit` (default: `credit_of(job)`), seed 0, 32 rows a batch."""
    from gear_trl.train import build_trainer, load_splits, parse_args

    argv = ["--config", job["recipe"], "--credit", credit or credit_of(job), "--output_dir", str(out_dir / "trainer"),
            "--report_to", "none", "--seed", "0", "--per_device_train_batch_size", "32",
            *job.get("overrides", [])]  # fmt: skip
    script_args, training_args, model_args = parse_args(argv)
    script_args.dataset_train_split = job["eval"]["split"]
    script_args.max_train_samples = None
    dataset, _ = load_splits(script_args, training_args)
    return build_trainer(script_args, training_args, model_args, dataset), dataset
