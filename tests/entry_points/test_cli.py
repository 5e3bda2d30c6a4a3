"""The training entry point as a user runs it: recipe parsing, errors before training, resume, save, model card."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from gear_trl.train import main, parse_args
from gear_trl.trainer import hub
from gear_trl.trainer.gear_trainer import GEARTrainer

RECIPE = "recipes/tiny/config_math.yaml"


def args_for(tmp_path, *overrides):
    return parse_args(["--config", RECIPE, "--output_dir", str(tmp_path / "run"), *overrides])


def test_every_shipped_recipe_parses():
    recipes = [os.path.join(root, f) for root, _, files in os.walk("recipes") for f in files if f.endswith(".yaml")]
    assert len(recipes) >= 5
    for recipe in recipes:
        with open(recipe) as handle:
            use_cpu = yaml.safe_load(handle).get("use_cpu", False)
        overrides = [] if use_cpu else ["--use_cpu", "true", "--bf16", "false", "--use_vllm", "false"]
        script_args, _training_args, model_args = parse_args(["--config", recipe, *overrides])
        assert model_args.model_name_or_path and script_args.dataset_name, recipe


def test_unknown_recipe_key_is_named_with_a_suggestion(tmp_path):
    with open(RECIPE) as handle:
        recipe = yaml.safe_load(handle)
    recipe["onset_treshold"] = 0.2
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(recipe))
    with pytest.raises(ValueError) as err:
        parse_args(["--config", str(path)])
    assert "'onset_treshold'" in str(err.value) and "did you mean 'onset_threshold'" in str(err.value)


def test_bad_value_in_recipe_fails_at_parse_time(tmp_path):
    with pytest.raises(ValueError, match="`credit` must be one of"):
        args_for(tmp_path, "--credit", "segments")


def _never_train(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("training started although the push could not succeed")

    monkeypatch.setattr(GEARTrainer, "train", fail)


def test_push_to_hub_offline_fails_before_training(tmp_path, monkeypatch):
    _never_train(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubAccessError, match="HF_HUB_OFFLINE"):
        main(*args_for(tmp_path, "--push_to_hub", "true", "--hub_model_id", "someone/tiny"))


def test_push_to_hub_without_token_fails_before_training(tmp_path, monkeypatch):
    _never_train(monkeypatch)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "get_token", lambda: None)
    with pytest.raises(hub.HubAccessError, match="no Hugging Face token"):
        main(*args_for(tmp_path, "--push_to_hub", "true", "--hub_model_id", "someone/tiny"))


def test_push_to_hub_with_unreachable_hub_fails_before_training(tmp_path, monkeypatch):
    _never_train(monkeypatch)
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "get_token", lambda: "hf_fake")

    class Unreachable:
        def whoami(self, token=None):
            raise ConnectionError("no route to huggingface.co")

    monkeypatch.setattr(hub, "HfApi", Unreachable)
    with pytest.raises(hub.HubAccessError, match="no route"):
        main(*args_for(tmp_path, "--push_to_hub", "true", "--hub_model_id", "someone/tiny"))


@pytest.mark.slow
def test_run_saves_model_and_card_then_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    first = main(*args_for(tmp_path, "--max_steps", "2", "--save_steps", "2"))
    out = tmp_path / "run"
    assert first.state.global_step == 2
    assert (out / "checkpoint-2").is_dir() and (out / "model.safetensors").is_file()
    card = (out / "README.md").read_text()
    assert "GEAR" in card and "2605.11853" in card

    generations = []
    original = GEARTrainer._generate_and_score_completions

    def counting(self, inputs):
        generations.append(self.state.global_step)
        return original(self, inputs)

    monkeypatch.setattr(GEARTrainer, "_generate_and_score_completions", counting)
    second = main(*args_for(tmp_path, "--max_steps", "4", "--save_steps", "2"))
    assert second.state.global_step == 4
    assert generations == [2, 3], "the resumed run must continue from step 2, not start over"
    steps = [entry["step"] for entry in second.state.log_history if "loss" in entry]
    assert steps == [1, 2, 3, 4]


@pytest.mark.slow
def test_lora_run_saves_only_the_adapter(tmp_path):
    main(
        *args_for(
            tmp_path,
            "--max_steps",
            "1",
            "--use_peft",
            "true",
            "--lora_r",
            "4",
            "--lora_alpha",
            "8",
            "--lora_target_modules",
            "q_proj",
            "v_proj",
            "--save_strategy",
            "no",
        )
    )
    out = tmp_path / "run"
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["r"] == 4
    assert not (out / "model.safetensors").exists()
