"""Every user mistake at the command line is one `error: ...` line that says what to fix, never a traceback, and is
found before any model loads (issue 22)."""

from __future__ import annotations

import pytest

from gear_trl.inputs.preflight import check_trackers
from gear_trl.trainer import hub

RECIPE = "recipes/tiny/config_math.yaml"


pytestmark = pytest.mark.usefixtures("never_load_a_model")  # tests/conftest.py


def error_line(cli, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli(argv)
    message = exit_info.value.code
    assert isinstance(message, str), f"exit status {message!r} instead of an error line"
    assert message.startswith("error: ") and "\n" not in message and "Traceback" not in message
    return message


def train_error(tmp_path, *overrides) -> str:
    from gear_trl.train import cli

    return error_line(cli, ["--config", RECIPE, "--output_dir", str(tmp_path / "run"), *overrides])


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["--onset_treshold", "0.2"], "did you mean 'onset_threshold'"),
        (["--credit", "segments"], "`credit` must be one of"),
        (
            ["--environment", "bank"],
            "Unknown environment 'bank'; built-in names: ['bfcl', 'bfcl_official', 'calculator']",
        ),
        (["--environment", "my_tasks.bank:BankEnv"], "cannot import module 'my_tasks.bank'"),
        (["--reward_funcs", "acuracy"], "Unknown reward 'acuracy'"),
        (["--reward_funcs", "tests.bank_plugin.bank:balance"], "has no attribute 'balance'"),
        (["--dataset_format", "gsm8"], "Unknown dataset_format 'gsm8'"),
        (["--dataset_format", "math"], "dataset_format 'math' needs columns ['problem', 'solution']"),
        (["--dataset_train_split", "validation"], "`dataset_train_split` 'validation' is not in"),
        (["--dataset_name", "data/math/nope"], "no such local folder: 'data/math/nope'"),
        (["--report_to", "wandb"], "`report_to: wandb` needs the wandb package, which is not installed: pip install"),
    ],
)
def test_train_errors_are_one_line(tmp_path, overrides, expected):
    assert expected in train_error(tmp_path, *overrides)


def test_push_to_hub_without_a_token_is_one_line_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "get_token", lambda: None)
    message = train_error(tmp_path, "--push_to_hub", "true", "--hub_model_id", "someone/tiny")
    assert "no Hugging Face token" in message and "push_to_hub: false" in message


def test_missing_trackers_name_the_install_extra(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    for tracker, extra in (("wandb", "wandb"), ("tensorboard", "tensorboard"), ("trackio", "trackio")):
        with pytest.raises(ValueError, match=rf"pip install 'gear_trl\[{extra}\]'"):
            check_trackers([tracker])
    check_trackers(["none"])
    check_trackers("none")


def test_every_tracker_extra_is_declared_in_setup_cfg():
    import configparser

    from gear_trl.inputs.preflight import TRACKERS

    parser = configparser.ConfigParser()
    parser.read("setup.cfg")
    extras = parser["options.extras_require"]
    for name, (_, package, extra) in TRACKERS.items():
        if extra is not None:
            assert extra in extras and package in extras[extra], name


def test_inspect_names_its_own_split_option(tmp_path):
    from gear_trl.inspect_credit import cli

    message = error_line(cli, ["--config", RECIPE, "--split", "validation", "--out", str(tmp_path)])
    assert "`--split` 'validation' is not in" in message and "dataset_train_split" not in message


def test_evaluate_with_an_own_environment_needs_a_reward(tmp_path):
    from gear_trl.evaluation.cli import cli

    argv = ["--model", "data/tiny-qwen3", "--dataset", "data/calc_tools", "--environment"]
    message = error_line(cli, [*argv, "tests.bank_plugin.bank:BankEnv"])
    assert "has no default reward and no `get_reward` method: name one with --reward" in message
    message = error_line(cli, [*argv, "tests.bank_plugin.bank:Nope"])
    assert "has no attribute 'Nope'" in message


def test_evaluate_reads_a_single_file_through_a_column_mapping(tmp_path):
    import json

    from gear_trl.evaluation.loops import load_eval_split

    path = tmp_path / "my_math.jsonl"
    path.write_text(
        "\n".join(json.dumps({"question": f"{i} + 1?", "answer": f"So.\nAnswer: {i + 1}"}) for i in range(3))
    )
    data, adapter = load_eval_split(
        str(path), "train", dataset_format="columns", columns=("question", "answer", r"Answer:\s*(.+)")
    )
    assert adapter == "columns" and data["ground_truth"] == ["1", "2", "3"]
