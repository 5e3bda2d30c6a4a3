"""The unbiased pass@k estimator on hand-worked cases, `--max_samples`, and the trained run's chat-template settings
read from the model folder (and overridden by flags)."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from math import comb
from types import SimpleNamespace

import pytest

from gear_trl.evaluation.cli import main
from gear_trl.evaluation.pass_at_k import default_pass_ks, pass_at_k
from gear_trl.evaluation.run_settings import RUN_SETTINGS, read_run_settings, write_run_settings
from gear_trl.evaluation.scoring import _report
from gear_trl.inputs.errors import UserInputError

TINY = "data/tiny-qwen3"


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (2, 1, 1, 0.5),  # 1 - C(1,1)/C(2,1) = 1 - 1/2
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (10, 3, 5, 11 / 12),  # 1 - C(7,5)/C(10,5) = 1 - 21/252
        (8, 0, 4, 0.0),  # nothing correct
        (8, 5, 4, 1.0),  # only 3 wrong: every 4-subset holds a correct one
        (16, 4, 1, 0.25),  # pass@1 is the fraction correct
    ],
)
def test_pass_at_k_on_hand_worked_cases(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_is_stable_where_the_binomials_overflow_a_float():
    # C(400, 200) ~ 1e119 and C(1000, 500) ~ 2.7e299; the ratio is computed exactly with integers as a reference.
    for n, c, k in [(400, 13, 200), (1000, 1, 500), (1000, 3, 10), (64, 32, 32)]:
        exact = 1 - Fraction(comb(n - c, k), comb(n, k))
        assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-9)
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)


def test_pass_at_k_refuses_impossible_counts():
    for n, c, k in [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)]:
        with pytest.raises(ValueError, match="pass@k"):
            pass_at_k(n, c, k)


def test_default_ks_are_one_the_powers_of_two_and_n():
    assert default_pass_ks(1) == [1]
    assert default_pass_ks(6) == [1, 2, 4, 6]
    assert default_pass_ks(16) == [1, 2, 4, 8, 16]


def _samples(rewards_per_prompt):
    return [
        {"index": i, "sample": j, "reward": r, "rewards": {"accuracy": r}, "finished": True}
        for i, rewards in enumerate(rewards_per_prompt)
        for j, r in enumerate(rewards)
    ]


def test_the_report_averages_pass_at_k_over_prompts_beside_avg_at_k():
    # prompt 0: n=4, c=2 -> pass@2 = 1 - C(2,2)/C(4,2) = 5/6; prompt 1: nothing correct; prompt 2: all correct.
    per_sample = _samples([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    report = _report(3, 4, ["accuracy"], per_sample)
    assert report["avg@4"] == report["accuracy"] == pytest.approx(6 / 12)
    assert report["pass_at"]["1"] == pytest.approx((2 / 4 + 0 + 1) / 3)
    assert report["pass_at"]["2"] == pytest.approx((5 / 6 + 0 + 1) / 3)
    assert report["pass_at"]["4"] == report["pass_at_k"] == pytest.approx(2 / 3)
    # a partial score is not a pass; a sample a reward does not score leaves that prompt's n smaller
    partial = _report(1, 4, ["accuracy"], _samples([[0.9, None, 1.0, 0.0]]), pass_ks=[1, 3])
    assert partial["pass_at"]["1"] == pytest.approx(1 / 3)
    assert partial["pass_at"]["3"] == pytest.approx(1.0)  # n=3 scored, c=1, k=3
    assert partial["pass_at"]["4"] is None  # no prompt has four scored samples
    with pytest.raises(UserInputError, match="num_samples"):
        _report(1, 4, ["accuracy"], per_sample, pass_ks=[8])


def _tiny_run(tmp_path, chat_template_kwargs):
    folder = tmp_path / "run"
    shutil.copytree(TINY, folder)
    args = SimpleNamespace(chat_template_kwargs=chat_template_kwargs, max_completion_length=64)
    write_run_settings(str(folder), args, SimpleNamespace(system_prompt=None))
    return folder


def _run(tmp_path, model, *extra):
    output = tmp_path / "report.json"
    argv = ["--model", str(model), "--dataset", "data/math/generic", "--max_samples", "2", "--max_new_tokens", "2"]
    main([*argv, "--output", str(output), "--no_progress", *extra])
    return json.loads(output.read_text())


def test_the_trained_runs_chat_settings_are_read_from_its_folder_and_flags_override_them(tmp_path):
    folder = _tiny_run(tmp_path, {"enable_thinking": False})
    report = _run(tmp_path, folder)
    assert report["n"] == 2  # --max_samples
    assert report["config"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert report["config"]["run_settings"] == str(folder / RUN_SETTINGS)
    assert report["per_sample"][0]["prompt"]  # rendered; the template switch itself is tested in test_evaluate
    assert _run(tmp_path, folder, "--enable_thinking", "true")["config"]["chat_template_kwargs"] == {
        "enable_thinking": True
    }
    override = _run(tmp_path, folder, "--chat_template_kwargs", '{"enable_thinking": true, "x": 1}')
    assert override["config"]["chat_template_kwargs"] == {"enable_thinking": True, "x": 1}
    # a checkpoint below the run's folder shares its settings; a folder without the file has none
    checkpoint = folder / "checkpoint-5"
    shutil.copytree(TINY, checkpoint)
    assert read_run_settings(str(checkpoint))[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert read_run_settings(TINY) == ({}, None)
    assert _run(tmp_path, TINY)["config"]["chat_template_kwargs"] == {}


def test_a_broken_settings_file_is_named(tmp_path):
    folder = _tiny_run(tmp_path, None)
    (folder / RUN_SETTINGS).write_text("[1, 2]")
    with pytest.raises(UserInputError, match=RUN_SETTINGS):
        read_run_settings(str(folder))


def test_a_pass_k_above_num_samples_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", no_load)
    with pytest.raises(UserInputError, match="num_samples"):
        _run(tmp_path, TINY, "--temperature", "1", "--num_samples", "2", "--pass_k", "4")
    with pytest.raises(UserInputError, match="JSON object"):
        _run(tmp_path, TINY, "--chat_template_kwargs", "[1]")


def test_training_records_its_chat_settings_in_the_output_folder(tmp_path, monkeypatch):
    from gear_trl.train import main as train_main
    from gear_trl.train import parse_args
    from gear_trl.trainer.gear_trainer import GEARTrainer

    class Stop(Exception):
        pass

    def stop(self, *args, **kwargs):
        raise Stop

    monkeypatch.setattr(GEARTrainer, "train", stop)
    out = tmp_path / "run"
    args = parse_args(["--config", "recipes/tiny/config_math.yaml", "--output_dir", str(out)])
    args[1].chat_template_kwargs = {"enable_thinking": False}
    with pytest.raises(Stop):
        train_main(*args)
    settings, path = read_run_settings(str(out))
    assert path == str(out / RUN_SETTINGS) and settings["chat_template_kwargs"] == {"enable_thinking": False}
    assert settings["max_completion_length"] == args[1].max_completion_length
    assert settings["prompt_template"] == args[0].prompt_template  # the math template, the recipe naming none


def test_the_prompt_template_comes_from_the_flag_else_the_trained_run_else_the_math_default(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(TINY, folder)
    args = SimpleNamespace(chat_template_kwargs=None, max_completion_length=8)
    write_run_settings(str(folder), args, SimpleNamespace(system_prompt=None, prompt_template="Q: {question}"))
    def user_text(report):
        return report["per_sample"][0]["prompt"][-1]["content"]

    recorded = user_text(_run(tmp_path, folder))
    assert "Q: " in recorded and "boxed" not in recorded  # the run's own template
    flagged = user_text(_run(tmp_path, folder, "--prompt_template", "{question} (briefly)"))
    assert "(briefly)" in flagged and "Q: " not in flagged
    assert "boxed" in user_text(_run(tmp_path, TINY))  # no run settings: the math template
    for bad in ("no field", "{question} {answer}", "{question"):
        with pytest.raises(UserInputError, match="--prompt_template"):
            _run(tmp_path, TINY, "--prompt_template", bad)
