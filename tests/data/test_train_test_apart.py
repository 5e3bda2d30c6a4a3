"""Train and test apart (issue 32): the tool-use recipes train on xLAM's function-calling set, never on BFCL or
ACEBench; `gear_trl.train` warns when a training split shares prompts with a split the model is scored on; and no
shipped recipe's local training data shares a prompt with its evaluation data."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml
from datasets import load_dataset

from gear_trl.data import detect_adapter, prepare_dataset
from gear_trl.data.overlap import request_text, shared_requests
from gear_trl.data.xlam import XLAM, possible_answer, xlam_tool_schema, xlam_type
from gear_trl.rewards import tool_call_accuracy

REPO = Path(__file__).resolve().parents[2]
RECIPES = sorted(REPO.glob("recipes/**/*.yaml"))
XLAM_SAMPLE = "data/xlam_sample"
# Local stand-ins for Hub training sets the recipes name (the real ones cannot be downloaded here).
LOCAL_STAND_INS = {"Salesforce/xlam-function-calling-60k": (XLAM_SAMPLE, None)}
# Every evaluation set kept in the repository: no recipe's training split may share a prompt with one of them.
LOCAL_BENCHMARKS = [("data/bfcl", "single_turn"), ("data/bfcl", "multi_turn")]
# A recipe allowed to train on a benchmark, and why (its header must say so).
EXEMPT = {"recipes/tiny/config_tool_use.yaml": "never scored"}


def call_text(calls) -> str:
    return "".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in calls)


def score(rows, completions) -> list:
    return tool_call_accuracy(
        [[{"role": "assistant", "content": text}] for text in completions],
        possible_answer=rows["possible_answer"],
        tools=rows["tools"],
    )


@pytest.fixture(scope="module")
def xlam_rows():
    return prepare_dataset(load_dataset(XLAM_SAMPLE, split="train"))


def test_xlam_types_and_schemas():
    assert xlam_type("List[int], optional") == ("array", True)
    assert xlam_type("str") == ("string", False)
    assert xlam_type("Dict[str, Any]") == ("object", False)
    assert xlam_type("Callable") == (None, False)
    tool = {
        "name": "geo.distance",
        "description": "d",
        "parameters": {
            "a": {"type": "float", "description": "x"},
            "unit": {"type": "str, optional", "description": "u", "default": "km"},
            "city": {"type": "str", "description": "c", "default": ""},  # xLAM's empty default: still required
        },
    }
    schema, optional = xlam_tool_schema(tool)
    function = schema["function"]
    assert function["name"] == "geo_distance"
    assert function["parameters"]["required"] == ["a", "city"]
    assert function["parameters"]["properties"]["a"]["type"] == "number"
    assert optional == {"unit": (True, "km")}
    # A left-out optional parameter may stay out or take its default; a given default may also be left out.
    assert possible_answer([{"name": "geo.distance", "arguments": {"a": 1.5}}], {"geo_distance": optional}) == [
        {"geo_distance": {"a": [1.5], "unit": ["", "km"]}}
    ]
    assert possible_answer(
        [{"name": "geo.distance", "arguments": {"a": 1.5, "unit": "km"}}], {"geo_distance": optional}
    ) == [{"geo_distance": {"a": [1.5], "unit": ["km", ""]}}]


def test_the_sample_is_picked_by_its_columns_and_scores_its_reference_calls(xlam_rows):
    assert detect_adapter(load_dataset(XLAM_SAMPLE, split="train").column_names) is XLAM
    assert len(xlam_rows) == 48 and {"prompt", "tools", "ground_truth", "possible_answer"} <= set(
        xlam_rows.column_names
    )
    references = [json.loads(truth) for truth in xlam_rows["ground_truth"]]
    assert score(xlam_rows, [call_text(calls) for calls in references]) == [1.0] * len(xlam_rows)
    assert score(xlam_rows, ["I would rather not call anything."] * len(xlam_rows)) == [0.0] * len(xlam_rows)
    # A wrong argument value fails; an optional argument left out (or given its default) passes.
    wrong = [
        [{**call, "arguments": {key: "nope" for key in call["arguments"]}} for call in calls] for calls in references
    ]
    assert sum(score(xlam_rows, [call_text(calls) for calls in wrong])) == 0.0
    forecast = [
        i
        for i, calls in enumerate(references)
        if calls[0]["name"] == "get_weather_forecast" and "days" not in calls[0]["arguments"]
    ]
    assert forecast, "the sample has a forecast request without `days`"
    row = xlam_rows.select([forecast[0], forecast[0]])
    city = references[forecast[0]][0]["arguments"]["city"]
    with_default = call_text([{"name": "get_weather_forecast", "arguments": {"city": city, "days": 3}}])
    other_days = call_text([{"name": "get_weather_forecast", "arguments": {"city": city, "days": 4}}])
    assert score(row, [with_default, other_days]) == [1.0, 0.0]


def test_the_sample_is_written_by_its_script(tmp_path):
    from tests.utils import load_file

    script = load_file(REPO / "data/scripts/make_xlam_sample.py", "make_xlam_sample")
    script.main(["--out", str(tmp_path / "train.jsonl")])
    assert (tmp_path / "train.jsonl").read_text() == (REPO / XLAM_SAMPLE / "train.jsonl").read_text()


def test_request_text_reads_any_format():
    assert (
        request_text({"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": " Add  2\n"}]})
        == "add 2"
    )
    assert request_text({"question": "Add 2"}) == request_text({"query": "add   2"}) == "add 2"
    assert request_text({"answer": "4"}) is None
    assert shared_requests([{"problem": "What is 1+1?"}, {"problem": "x"}], [{"prompt": "what is 1+1?"}]) == [
        "what is 1+1"
    ]


def recipe_data(path: Path) -> tuple[str, str | None, str, list[tuple[str, str | None]]]:
    """(dataset, config, train split, held-out datasets) of a recipe, Hub training sets replaced by their local
    stand-in."""
    recipe = yaml.safe_load(path.read_text())
    name, config = recipe["dataset_name"], recipe.get("dataset_config")
    name, config = LOCAL_STAND_INS.get(name, (name, config))
    held_out = [
        (spec.partition(":")[0], spec.partition(":")[2] or None) for spec in recipe.get("held_out_datasets", [])
    ]
    return name, config, recipe.get("dataset_train_split", "train"), held_out


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: str(p.relative_to(REPO / "recipes")))
def test_no_recipe_trains_on_what_it_is_scored_on(path):
    name, config, split, held_out = recipe_data(path)
    if not name.startswith("data/"):
        pytest.skip(f"{name}: a Hub dataset without a local stand-in (checked by the run's own overlap warning)")
    dataset = load_dataset(str(REPO / name), config)
    train = dataset[split]
    evaluation = [(f"{name} {other}", dataset[other]) for other in dataset if other != split]
    for held_name, held_config in [*held_out, *LOCAL_BENCHMARKS]:
        if held_name.startswith("data/"):
            for other, rows in load_dataset(str(REPO / held_name), held_config).items():
                evaluation.append((f"{held_name}:{held_config} {other}", rows))
    relative = str(path.relative_to(REPO))
    overlapping = {label: len(shared_requests(train, rows)) for label, rows in evaluation}
    overlapping = {label: count for label, count in overlapping.items() if count}
    if relative in EXEMPT:
        assert EXEMPT[relative] in path.read_text(), f"{relative}: its header must say why it may train on a benchmark"
        assert overlapping, "an exempt recipe that no longer overlaps: drop the exemption"
        return
    assert not overlapping, f"{relative} trains on prompts it is scored on: {overlapping}"


@pytest.mark.parametrize("path", sorted(REPO.glob("recipes/Qwen3-*/*/config_tool_use.yaml")), ids=str)
def test_tool_use_recipes_keep_bfcl_and_acebench_for_evaluation(path):
    recipe = yaml.safe_load(path.read_text())
    assert recipe["dataset_name"] == "Salesforce/xlam-function-calling-60k" and recipe["dataset_format"] == "xlam"
    assert {"data/bfcl:single_turn", "data/bfcl:multi_turn"} <= set(recipe["held_out_datasets"])
    assert "environment" not in recipe and recipe["reward_funcs"] == ["tool_call_accuracy"]


@pytest.mark.parametrize("path", sorted(REPO.glob("recipes/Qwen3-*/*/config_math.yaml")), ids=str)
def test_math_recipes_train_on_the_train_split_and_hold_out_the_benchmarks(path):
    recipe = yaml.safe_load(path.read_text())
    assert (recipe["dataset_train_split"], recipe["dataset_test_split"]) == ("train", "test")
    assert {"HuggingFaceH4/MATH-500", "openai/gsm8k:main"} <= set(recipe["held_out_datasets"])


def test_train_warns_when_its_training_split_is_a_benchmark(tmp_path, monkeypatch):
    """The tiny tool-use recipe trains on BFCL rows: named as held out, BFCL's multi-turn split triggers the warning
    before the trainer is built; the xLAM sample against the same set does not."""
    from gear_trl.train import cli
    from gear_trl.trainer.gear_trainer import GEARTrainer

    def stop(*args, **kwargs):
        raise RuntimeError("trainer reached")

    monkeypatch.setattr(GEARTrainer, "__init__", stop)
    argv = ["--config", "recipes/tiny/config_tool_use.yaml", "--output_dir", str(tmp_path / "run")]
    shared = r"shares \d+ prompt\(s\) with split 'train' of 'data/bfcl:multi_turn'"
    with pytest.warns(UserWarning, match=shared), pytest.raises(RuntimeError, match="trainer reached"):
        cli([*argv, "--held_out_datasets", "data/bfcl:multi_turn"])
    recipe = yaml.safe_load((REPO / "recipes/tiny/config_tool_use.yaml").read_text())
    del recipe["environment"]
    recipe.update(
        dataset_name=XLAM_SAMPLE,
        dataset_format="xlam",
        reward_funcs=["tool_call_accuracy"],
        held_out_datasets=["data/bfcl:single_turn", "data/bfcl:multi_turn"],
    )
    (tmp_path / "xlam.yaml").write_text(yaml.safe_dump(recipe))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="trainer reached"):
            cli(["--config", str(tmp_path / "xlam.yaml"), "--output_dir", str(tmp_path / "run")])
    assert not [w for w in caught if "shares" in str(w.message)]
