"""Preflight says everything at once (issue 32): every problem found before the model loads in one message; one line
for a missing `--config` and an unknown `loss_type`; the closest name for a mistyped reward, environment or dataset
format; vLLM asked for but not installed; and the warning for full fine-tuning at a LoRA-sized learning rate."""

from __future__ import annotations

import inspect
import json
import warnings

import pytest

from gear_trl.inputs.preflight import (
    PreflightError,
    Problems,
    check_vllm,
    full_finetune_learning_rate_warning,
)
from gear_trl.trainer.gear_config import LOSS_TYPES

RECIPE = "recipes/tiny/config_math.yaml"


pytestmark = pytest.mark.usefixtures("never_load_a_model")  # tests/conftest.py


def error_of(argv) -> str:
    from gear_trl.train import cli

    with pytest.raises(SystemExit) as exit_info:
        cli(argv)
    message = exit_info.value.code
    assert isinstance(message, str) and message.startswith("error: ") and "Traceback" not in message, message
    return message


def one_line(argv) -> str:
    message = error_of(argv)
    assert "\n" not in message, message
    return message


def test_a_missing_config_file_is_one_line_naming_the_closest_file():
    assert one_line(["--config", "recipes/tiny/config_mth.yaml"]) == (
        "error: `--config`: no such recipe file: 'recipes/tiny/config_mth.yaml' (did you mean "
        "'recipes/tiny/config_math.yaml'?)."
    )
    assert "is a folder, not a recipe file" in one_line(["--config", "recipes/tiny"])
    assert "`--config` needs a recipe file" in one_line(["--config"])


def test_a_config_that_is_not_yaml_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rate: [1e-5\ncredit: gear\n")
    assert "the recipe is not valid YAML" in one_line(["--config", str(bad)])


def test_an_unknown_loss_type_is_refused_when_parsed(tmp_path):
    message = one_line(["--config", RECIPE, "--output_dir", str(tmp_path), "--loss_type", "dapoo"])
    assert "`loss_type` must be one of" in message and "(did you mean 'dapo'?)" in message


def test_the_loss_types_are_those_trl_computes():
    from trl import GRPOConfig, GRPOTrainer

    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    source = inspect.getsource(GRPOTrainer._compute_loss)
    for loss_type in LOSS_TYPES:
        assert f"'{loss_type}'" in help_text and f'"{loss_type}"' in source, loss_type


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["--reward_funcs", "acuracy"], "Unknown reward 'acuracy' (did you mean 'accuracy'?)"),
        (["--environment", "calculater"], "Unknown environment 'calculater' (did you mean 'calculator'?)"),
        (["--dataset_format", "gsm8"], "Unknown dataset_format 'gsm8' (did you mean 'gsm8k'?)"),
        (["--credit", "gaer"], "got 'gaer' (did you mean 'gear'?)"),
    ],
)
def test_mistyped_names_get_the_closest_one(tmp_path, overrides, expected):
    assert expected in one_line(["--config", RECIPE, "--output_dir", str(tmp_path), *overrides])


def test_every_problem_is_reported_in_one_message(tmp_path, monkeypatch):
    """Five independent mistakes, one run: each is listed, numbered, and nothing was loaded."""
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name, *a)
    )
    message = error_of(
        [
            "--config", RECIPE,
            "--output_dir", str(tmp_path),
            "--report_to", "wandb",
            "--model_name_or_path", "data/tiny-qwen4",
            "--reward_funcs", "acuracy",
            "--environment", "bfc",
            "--dataset_name", "data/math/nope",
        ]
    )  # fmt: skip
    lines = message.splitlines()
    assert lines[0] == "error: 5 problems, found before the model loaded:"
    expected = [
        "`report_to: wandb` needs the wandb package",
        "'data/tiny-qwen4' (did you mean 'data/tiny-qwen3'?)",
        "Unknown reward 'acuracy'",
        "Unknown environment 'bfc' (did you mean 'bfcl'?)",
        "no such local folder: 'data/math/nope'",
    ]
    assert len(lines) == 6
    for number, (line, text) in enumerate(zip(lines[1:], expected, strict=True), 1):
        assert line.startswith(f"  {number}. ") and text in line, (line, text)


def test_a_bad_row_and_a_bad_option_are_reported_together(tmp_path):
    """A check that reads the data runs beside the option checks, not after them."""
    bad = tmp_path / "rows.jsonl"
    bad.write_text(json.dumps({"prompt": "1+1?", "ground_truth": "2" * 100_001}) + "\n")
    message = error_of(
        ["--config", RECIPE, "--output_dir", str(tmp_path / "run"), "--dataset_name", str(bad),
         "--dataset_format", "generic", "--reward_funcs", "acuracy"]
    )  # fmt: skip
    assert message.startswith("error: 2 problems") and "Unknown reward 'acuracy'" in message
    assert "row 0: the ground truth is 100001 characters" in message


def test_problems_keep_each_message_once_and_let_bugs_through():
    problems = Problems()
    for _ in range(2):
        with problems.check():
            raise PreflightError("`x` is wrong.")
    assert problems.messages == ["`x` is wrong."]
    with pytest.raises(KeyError), problems.check():
        raise KeyError("a bug is not a user mistake")
    with pytest.raises(PreflightError, match=r"^`x` is wrong\.$"):
        problems.raise_if_any()
    Problems().raise_if_any()  # nothing found: nothing raised


def test_vllm_asked_for_but_not_installed(monkeypatch):
    import importlib.util
    import sys

    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(PreflightError, match=r"pip install 'gear_trl\[vllm\]'"):
        check_vllm(True)
    check_vllm(False)


def test_full_fine_tuning_at_a_lora_rate_is_warned():
    assert full_finetune_learning_rate_warning(True, 1e-5) is None  # LoRA
    assert full_finetune_learning_rate_warning(False, 1e-6) is None  # a full fine-tuning rate
    message = full_finetune_learning_rate_warning(False, 1e-5)
    assert "LoRA-sized" in message and "1e-05" in message
    # the repository's tiny models (hidden size 64) train at 1e-4 without the warning; a Qwen3-4B-wide one gets it
    assert full_finetune_learning_rate_warning(False, 1e-4, "data/tiny-qwen3") is None

    class Wide:
        class config:
            hidden_size = 2560

    assert full_finetune_learning_rate_warning(False, 1e-5, Wide()) == message


def test_train_warns_full_fine_tuning_at_a_lora_rate(tmp_path, monkeypatch):
    from gear_trl.inputs import preflight

    monkeypatch.setattr(preflight, "FULL_FINETUNE_MIN_HIDDEN_SIZE", 1)  # treat the tiny model as a real one
    from gear_trl.train import cli

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(AssertionError, match="the trainer"):
            cli(["--config", RECIPE, "--output_dir", str(tmp_path), "--use_peft", "false", "--learning_rate", "1e-5"])
    assert any("LoRA-sized" in str(w.message) for w in caught)


def test_a_hub_dataset_that_cannot_be_fetched_is_one_problem(monkeypatch):
    """A gated Hub dataset (the tool-use recipes' xLAM set) whose terms were not accepted: one line naming it."""
    import datasets

    from gear_trl.inputs import preflight

    def gated(*args, **kwargs):
        raise FileNotFoundError("Dataset 'Salesforce/xlam-function-calling-60k' is a gated dataset on the Hub.\nmore")

    monkeypatch.setattr(preflight, "hub_offline", lambda: False)
    monkeypatch.setattr(datasets, "load_dataset", gated)
    with pytest.raises(PreflightError, match="gated dataset needs its terms accepted") as info:
        preflight.load_dataset_named("Salesforce/xlam-function-calling-60k")
    assert "is a gated dataset on the Hub." in str(info.value) and "\n" not in str(info.value)


def test_a_prompt_template_without_its_question_field_is_named_with_the_other_problems(tmp_path):
    message = error_of(["--config", RECIPE, "--output_dir", str(tmp_path), "--prompt_template", "Answer: {answer}",
                        "--reward_funcs", "acuracy"])  # fmt: skip
    assert message.startswith("error: 2 problems") and "Unknown reward 'acuracy'" in message
    assert "`prompt_template` 'Answer: {answer}' must contain the field {question} exactly once" in message


def test_prompt_template_problems_by_hand():
    from gear_trl.data.math_tasks import MATH_PROMPT_TEMPLATE, prompt_template_problem

    assert prompt_template_problem(MATH_PROMPT_TEMPLATE) is None  # its \boxed{{}} is a literal pair of braces
    assert prompt_template_problem("{question}") is None
    assert "exactly once" in prompt_template_problem("{question} and {question}")
    assert "not a format string" in prompt_template_problem("{question} {")
    assert "must be text" in prompt_template_problem(None)
    assert prompt_template_problem("x", "--prompt_template").startswith("`--prompt_template`")


def test_a_prompt_template_that_shapes_no_prompt_is_warned_about():
    from types import SimpleNamespace

    from datasets import Dataset

    from gear_trl.data import get_adapter
    from gear_trl.data.math_tasks import MATH_PROMPT_TEMPLATE
    from gear_trl.train import unused_prompt_template

    text = Dataset.from_list([{"prompt": "1+1?", "ground_truth": "2"}])
    messages = Dataset.from_list([{"prompt": [{"role": "user", "content": "1+1?"}], "ground_truth": "2"}])
    own = SimpleNamespace(prompt_template="{question}")
    generic, trl = get_adapter("generic"), get_adapter("trl")
    assert unused_prompt_template(own, generic, text) is None  # it shapes the text questions
    assert unused_prompt_template(SimpleNamespace(prompt_template=MATH_PROMPT_TEMPLATE), trl, text) is None  # unset
    assert "already a list of messages" in unused_prompt_template(own, generic, messages)
    assert "builds its prompts itself" in unused_prompt_template(own, trl, text)
