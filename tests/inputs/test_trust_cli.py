"""User faults at the training and evaluation entry points: each is refused before the model loads with a message
that names what to fix, or handled so that a rerun works (partial checkpoints, SIGINT/SIGTERM)."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import warnings

import pytest
import torch
import yaml
from safetensors.torch import save_file

from gear_trl import train as train_cli
from gear_trl.evaluation import cli as evaluate_cli
from gear_trl.train import main, make_parser, parse_args
from gear_trl.trainer.gear_trainer import GEARTrainer

RECIPE = "recipes/tiny/config_math.yaml"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def args_for(tmp_path, *overrides):
    return parse_args(["--config", RECIPE, "--output_dir", str(tmp_path / "run"), *overrides])


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if the trainer (which loads the model) is ever constructed."""

    def fail(*args, **kwargs):
        raise AssertionError("the model was loaded although the input could be refused before")

    monkeypatch.setattr(GEARTrainer, "__init__", fail)


def write_gsm8k(folder, answers):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "train.jsonl", "w") as handle:
        handle.writelines(
            json.dumps({"question": f"What is {i} + 1?", "answer": answer}) + "\n" for i, answer in enumerate(answers)
        )
    return str(folder)


# ---------------------------------------------------------------------------------------------------------------------
# 1. Ground truth
# ---------------------------------------------------------------------------------------------------------------------


def test_gear_run_without_any_ground_truth_is_refused_naming_column_adapter_and_count(tmp_path, no_model_load):
    data = write_gsm8k(tmp_path / "data", [f"It is {i + 1}." for i in range(6)])  # no '####' anywhere
    with pytest.raises(ValueError) as err:
        main(*args_for(tmp_path, "--dataset_name", data))
    message = str(err.value)
    assert "6 of 6 rows" in message and "'ground_truth'" in message and "'gsm8k'" in message and "####" in message


def test_mostly_missing_ground_truth_warns_and_plain_grpo_with_format_only_is_not_refused(tmp_path):
    from gear_trl.inputs.preflight import check_ground_truth, ground_truth_users
    from gear_trl.rewards import get_reward_funcs

    rows = [{"prompt": "q", "ground_truth": value} for value in ("1", None, "", None)]
    from datasets import Dataset

    dataset = Dataset.from_list(rows)
    users = ground_truth_users("gear", True, get_reward_funcs(["format"]))
    with pytest.warns(UserWarning, match="3 of 4 rows"):
        assert check_ground_truth(dataset, "ground_truth", "generic", users, "train") == 3
    # nothing reads the ground truth: no refusal even when every row lacks it
    empty = Dataset.from_list([{"prompt": "q", "ground_truth": None}] * 2)
    assert ground_truth_users("none", False, get_reward_funcs(["format"])) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_ground_truth(empty, "ground_truth", "generic", [], "train")


# ---------------------------------------------------------------------------------------------------------------------
# 2. Partial checkpoints
# ---------------------------------------------------------------------------------------------------------------------


def fake_checkpoint(folder, step, *, weights="model.safetensors"):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    save_file({"w": torch.zeros(64, 64)}, str(folder / weights))
    torch.save({"state": {}}, folder / "optimizer.pt")
    return folder


def test_incomplete_checkpoints_are_skipped_with_their_reason(tmp_path):
    from gear_trl.trainer.checkpoints import find_resumable_checkpoint

    out = tmp_path / "run"
    good = fake_checkpoint(out / "checkpoint-2", 2)
    fake_checkpoint(out / "checkpoint-3", 3, weights="adapter_model.safetensors")  # LoRA: adapter weights only
    truncated = fake_checkpoint(out / "checkpoint-4", 4)
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    no_state = fake_checkpoint(out / "checkpoint-5", 5)
    (no_state / "trainer_state.json").unlink()
    configs_only = out / "checkpoint-6"
    configs_only.mkdir()
    (configs_only / "config.json").write_text("{}")
    (configs_only / "trainer_state.json").write_text(json.dumps({"global_step": 6}))
    bad_optimizer = fake_checkpoint(out / "checkpoint-7", 7)
    (bad_optimizer / "optimizer.pt").write_bytes((bad_optimizer / "optimizer.pt").read_bytes()[:20])
    bad_state = fake_checkpoint(out / "checkpoint-8", 8)
    (bad_state / "trainer_state.json").write_text('{"global_st')

    found, skipped = find_resumable_checkpoint(str(out))
    assert found == str(out / "checkpoint-3")
    reasons = {os.path.basename(path): why for path, why in skipped}
    assert list(reasons) == ["checkpoint-8", "checkpoint-7", "checkpoint-6", "checkpoint-5", "checkpoint-4"]
    assert "trainer_state.json cannot be read" in reasons["checkpoint-8"]
    assert "optimizer.pt" in reasons["checkpoint-7"]
    assert "no model weights" in reasons["checkpoint-6"]
    assert "trainer_state.json is missing" in reasons["checkpoint-5"]
    assert "model.safetensors is truncated" in reasons["checkpoint-4"]
    shutil.rmtree(out / "checkpoint-3")
    assert find_resumable_checkpoint(str(out))[0] == str(good)


def test_deepspeed_checkpoint_needs_the_folder_latest_names(tmp_path):
    from gear_trl.trainer.checkpoints import checkpoint_problem

    ckpt = tmp_path / "checkpoint-2"
    ckpt.mkdir()
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    (ckpt / "global_step2").mkdir()
    assert "latest" in checkpoint_problem(str(ckpt))
    (ckpt / "latest").write_text("global_step2")
    assert "model_states" in checkpoint_problem(str(ckpt))
    torch.save({}, ckpt / "global_step2" / "mp_rank_00_model_states.pt")
    torch.save({}, ckpt / "global_step2" / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    assert checkpoint_problem(str(ckpt)) is None


@pytest.mark.slow
def test_rerun_after_a_kill_during_save_resumes_from_the_last_complete_checkpoint(tmp_path, capsys):
    main(*args_for(tmp_path, "--max_steps", "2", "--save_steps", "2"))
    out = tmp_path / "run"
    # checkpoint-4: killed while writing the weights; checkpoint-6: killed before anything but the config
    shutil.copytree(out / "checkpoint-2", out / "checkpoint-4")
    weights = out / "checkpoint-4" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    (out / "checkpoint-6").mkdir()
    shutil.copy(out / "checkpoint-2" / "config.json", out / "checkpoint-6")
    capsys.readouterr()

    trainer = main(*args_for(tmp_path, "--max_steps", "3", "--save_strategy", "no"))
    printed = capsys.readouterr().out
    assert trainer.state.global_step == 3
    assert f"Resuming from {out / 'checkpoint-2'}" in printed
    assert f"Skipping incomplete checkpoint {out / 'checkpoint-6'}: trainer_state.json is missing" in printed
    assert f"Skipping incomplete checkpoint {out / 'checkpoint-4'}: model.safetensors is truncated" in printed


def test_explicit_incomplete_resume_from_checkpoint_is_refused(tmp_path, no_model_load):
    ckpt = tmp_path / "run" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    with pytest.raises(ValueError, match="trainer_state.json is missing"):
        main(*args_for(tmp_path, "--resume_from_checkpoint", str(ckpt)))


# ---------------------------------------------------------------------------------------------------------------------
# 3. Output directory
# ---------------------------------------------------------------------------------------------------------------------


def test_unwritable_output_dir_is_refused_before_the_model_loads(tmp_path, no_model_load):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"`output_dir` '.*a_file/run' cannot be written"):
        main(*parse_args(["--config", RECIPE, "--output_dir", str(blocker / "run")]))


# ---------------------------------------------------------------------------------------------------------------------
# 4. SIGINT / SIGTERM
# ---------------------------------------------------------------------------------------------------------------------


def _env():
    env = dict(os.environ)
    env.update(PYTHONPATH=REPO, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    return env


@pytest.mark.slow
def test_sigterm_mid_run_saves_a_checkpoint_and_the_rerun_resumes_from_it(tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "gear_trl.train", "--config", RECIPE, "--output_dir", str(out)]
    command += ["--max_steps", "50", "--save_strategy", "no", "--max_completion_length", "16"]
    proc = subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    deadline = time.time() + 300
    while not any("'loss'" in line for line in lines):  # a step has been logged: training is under way
        assert proc.poll() is None, "".join(lines)[-3000:]
        assert time.time() < deadline, "no training step logged in 300 s"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == train_cli.EXIT_INTERRUPTED, "".join(lines)[-3000:]
    reader.join(timeout=10)
    text = "".join(lines)
    assert "Traceback" not in text
    saved = [name for name in os.listdir(out) if name.startswith("checkpoint-")]
    assert len(saved) == 1, saved
    step = int(saved[0].split("-")[1])
    assert 1 <= step < 50
    assert f"Stopped by SIGTERM after step {step}; checkpoint saved to {out / saved[0]}" in text
    assert not (out / "model.safetensors").exists(), "an interrupted run saves a checkpoint, not a final model"

    command[command.index("50")] = str(step + 1)
    rerun = subprocess.run(command, check=False, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"Resuming from {out / saved[0]}" in rerun.stdout
    state = json.loads((out / f"checkpoint-{step}" / "trainer_state.json").read_text())
    assert state["global_step"] == step
    assert (out / "model.safetensors").is_file()


def test_interrupt_callback_asks_for_save_and_stop_at_the_step_boundary():
    from transformers import TrainerControl, TrainerState

    from gear_trl.trainer import interrupt
    from gear_trl.trainer.interrupt import InterruptCallback

    callback = InterruptCallback()
    state, control = TrainerState(), TrainerControl()
    previous = signal.getsignal(signal.SIGINT)
    # Start from Python's own disposition whatever this process inherited: a job started with `&` from a
    # non-interactive shell inherits SIGINT as ignored, and the callback rightly restores what it found.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    callback.on_train_begin(None, state, control)
    try:
        state.global_step = 3
        callback.on_step_end(None, state, control)
        assert not control.should_save and not control.should_training_stop
        os.kill(os.getpid(), signal.SIGINT)  # handled: no KeyboardInterrupt
        time.sleep(0.1)
        state.global_step = 4
        callback.on_step_end(None, state, control)
        assert control.should_save and control.should_training_stop
        assert (callback.signal_name, callback.step) == ("SIGINT", 4)
        os.kill(os.getpid(), signal.SIGINT)  # the launcher relaying the same Ctrl-C: ignored
        time.sleep(0.1)
        callback._received_at -= interrupt.REPEAT_WINDOW_S  # later, a user insisting: stop at once
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
    finally:
        callback.on_train_end(None, state, control)
        signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------------------------------------------------------------
# 5. Mistyped local paths, uncached Hub ids offline
# ---------------------------------------------------------------------------------------------------------------------


def test_mistyped_local_model_path_is_named(tmp_path, no_model_load):
    with pytest.raises(ValueError, match=r"no such local folder: 'data/tiny-qwen4' \(did you mean 'data/tiny-qwen3'"):
        main(*args_for(tmp_path, "--model_name_or_path", "data/tiny-qwen4"))


def test_mistyped_local_dataset_folder_is_named(tmp_path, no_model_load):
    with pytest.raises(ValueError, match=r"no such local folder: 'data/math/gsm8k_stlye'"):
        main(*args_for(tmp_path, "--dataset_name", "data/math/gsm8k_stlye"))


def test_uncached_hub_model_offline_says_so(tmp_path, no_model_load, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        ValueError, match=r"'nobody-xyz/no-model' is not a local folder and not in the local .*HF_HUB_OFF"
    ):
        main(*args_for(tmp_path, "--model_name_or_path", "nobody-xyz/no-model"))


def test_evaluate_names_a_mistyped_model_path_and_dataset_folder(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(evaluate_cli, "load_model", fail)
    with pytest.raises(ValueError, match=r"`--model`: no such local folder: './outputs/tiny-gear-mth'"):
        evaluate_cli.main(["--model", "./outputs/tiny-gear-mth", "--dataset", "data/math/generic"])
    with pytest.raises(ValueError, match=r"`--dataset`: no such local folder: 'data/math/generik'"):
        evaluate_cli.main(["--model", "data/tiny-qwen3", "--dataset", "data/math/generik"])


# ---------------------------------------------------------------------------------------------------------------------
# 6. Precision: accelerate config / DeepSpeed versus the recipe
# ---------------------------------------------------------------------------------------------------------------------


def test_shipped_accelerate_configs_leave_precision_to_the_recipe():
    for name in os.listdir(os.path.join(REPO, "accelerate_configs")):
        with open(os.path.join(REPO, "accelerate_configs", name)) as handle:
            assert yaml.safe_load(handle)["mixed_precision"] == "no", name


def test_precision_mismatch_is_refused_before_the_model_loads(tmp_path, no_model_load, monkeypatch):
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    with pytest.raises(ValueError, match="mixed_precision: bf16 but the recipe has bf16: false"):
        main(*args_for(tmp_path))


def test_deepspeed_config_precision_must_match_or_be_auto(tmp_path):
    from gear_trl.inputs.preflight import check_precision

    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}))
    with pytest.raises(ValueError, match=r"bf16.enabled: true but the recipe has bf16: false"):
        check_precision(False, False, environ={"ACCELERATE_DEEPSPEED_CONFIG_FILE": str(ds)})
    check_precision(True, False, environ={"ACCELERATE_DEEPSPEED_CONFIG_FILE": str(ds)})
    check_precision(False, False, deepspeed={"bf16": {"enabled": "auto"}}, environ={})
    with pytest.raises(ValueError, match="fp16"):
        check_precision(False, False, environ={"ACCELERATE_MIXED_PRECISION": "fp16"})
    check_precision(False, False, environ={"ACCELERATE_MIXED_PRECISION": "no"})


# ---------------------------------------------------------------------------------------------------------------------
# 7. Reward values
# ---------------------------------------------------------------------------------------------------------------------


def inf_reward(completions, **kwargs):
    return [math.inf if i % 2 else 1.0 for i in range(len(completions))]


def text_reward(completions, **kwargs):
    return ["1.0" for _ in completions]


def test_non_finite_rewards_become_none_with_a_warning_and_a_metric():
    from gear_trl.rewards.guard import guard_reward_func

    logged = []
    guarded = guard_reward_func(inf_reward)
    assert guarded.__name__ == "inf_reward"
    with pytest.warns(UserWarning, match="'inf_reward' returned 2 non-finite"):
        values = guarded(["a", "b", "c", "d"], log_metric=lambda name, value: logged.append((name, value)))
    assert values == [1.0, None, 1.0, None]
    assert logged == [("rewards/inf_reward/non_finite_frac", 0.5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once only
        guarded(["a", "b"], log_metric=lambda *a: None)


def test_reward_returning_strings_names_the_function():
    from gear_trl.rewards.guard import guard_reward_func

    with pytest.raises(TypeError, match=r"Reward function 'text_reward' returned '1.0' \(str\) for completion 0"):
        guard_reward_func(text_reward)(["a"])


@pytest.mark.slow
def test_training_with_an_inf_reward_logs_finite_rewards_and_the_non_finite_share(tmp_path, monkeypatch):
    from gear_trl import rewards

    monkeypatch.setitem(rewards.REWARD_FUNCS, "inf_reward", inf_reward)
    with pytest.warns(UserWarning, match="inf_reward"):
        trainer = main(
            *args_for(tmp_path, "--max_steps", "1", "--save_strategy", "no", "--reward_funcs", "inf_reward", "format")
        )
    logs = [entry for entry in trainer.state.log_history if "rewards/inf_reward/mean" in entry]
    assert logs and all(math.isfinite(entry["rewards/inf_reward/mean"]) for entry in logs)
    assert logs[0]["rewards/inf_reward/non_finite_frac"] == pytest.approx(0.5)
    assert math.isfinite(logs[0]["reward"])


# ---------------------------------------------------------------------------------------------------------------------
# 8-9. --help and command-line typos
# ---------------------------------------------------------------------------------------------------------------------


def test_help_shows_config_then_recipe_and_gear_options_first():
    text = make_parser().format_help()
    lines = text.splitlines()
    position = {
        key: next(i for i, line in enumerate(lines) if line.lstrip().startswith(key))
        for key in (
            "--config",
            "--dataset_format",
            "--reward_funcs",
            "--credit",
            "--onset_threshold",
            "--learning_rate",
        )
    }
    assert position["--config"] < position["--dataset_format"] < position["--credit"] < position["--learning_rate"]
    assert position["--onset_threshold"] < 200, "GEAR's options must not be buried after the Trainer's ~300"
    assert len(lines[0]) < 100, "the usage line must not list every option"
    assert "GEAR credit assignment:" in text


def test_mistyped_command_line_option_gets_a_suggestion(tmp_path):
    with pytest.raises(ValueError) as err:
        args_for(tmp_path, "--onset_treshold", "0.2")
    assert "'onset_treshold' (did you mean 'onset_threshold'?)" in str(err.value)
    with pytest.raises(ValueError, match=r"'learning_rat' \(did you mean 'learning_rate'\?\)"):
        args_for(tmp_path, "--learning-rat=0.1")  # a prefix: argparse would have taken it for --learning-rate
