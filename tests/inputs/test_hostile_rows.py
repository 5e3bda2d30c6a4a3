"""Hostile dataset rows are refused before the model loads, naming the row: a 1 MB ground truth, an empty prompt, a
prompt longer than the model's context leaves room for, invalid JSON in `tools` / `ground_truth`, a tool schema with
an unknown type. (`gear_trl.trainer.rows`)"""

from __future__ import annotations

import json

import pytest
from trl import GRPOTrainer

from gear_trl import GEARTrainer
from gear_trl.inputs.errors import UserInputError
from gear_trl.inputs.preflight import PreflightError
from gear_trl.train import main, parse_args

CALC = "recipes/tiny/config_calc_tools.yaml"


@pytest.fixture
def no_model_load(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the model was loaded although the rows could be refused before")

    # GEARTrainer's own checks (the environment's) run before GRPOTrainer loads the model.
    monkeypatch.setattr(GRPOTrainer, "__init__", fail)


def calc_rows(tmp_path, bad_index: int, **bad) -> str:
    """data/calc_tools' first 6 training rows as a local dataset, row `bad_index` with the columns in `bad`."""
    with open("data/calc_tools/train.jsonl") as handle:
        rows = [json.loads(next(handle)) for _ in range(6)]
    rows[bad_index].update(bad)
    folder = tmp_path / "data"
    folder.mkdir()
    with open(folder / "train.jsonl", "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    return str(folder)


def run(tmp_path, dataset, *overrides):
    args = [
        "--config",
        CALC,
        "--dataset_name",
        dataset,
        "--output_dir",
        str(tmp_path / "run"),
        "--eval_strategy",
        "no",
    ]
    return main(*parse_args([*args, *overrides]))


def tool_schema(kind: str) -> str:
    function = {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": kind}}}}
    return json.dumps([{"type": "function", "function": function}])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"ground_truth": json.dumps(["x" * (1 << 20)])},
            r"row 3: the ground truth is 1048580 characters \(at most 100000\)",
        ),
        ({"tools": '[{"type": "function"'}, r"row 3: `tools` is not valid JSON"),
        ({"ground_truth": '[{"name": "add", '}, r"row 3: `ground_truth` is not valid JSON"),
        ({"tools": tool_schema("int")}, r"row 3: `tools`\[0\] \(add\) parameters.a has type 'int'"),
        ({"tools": '{"name": "add"}'}, r"row 3: `tools` must be a JSON list of tool schemas"),
        ({"initial_config": "{oops"}, r"row 3: `initial_config` is not valid JSON"),
    ],
)
def test_a_hostile_row_is_refused_before_the_model_loads_naming_its_index(tmp_path, no_model_load, bad, message):
    with pytest.raises(PreflightError, match=r"1 of 6 rows of split 'train' of .* cannot be trained on: " + message):
        run(tmp_path, calc_rows(tmp_path, 3, **bad))


@pytest.mark.parametrize("prompt", [[], [{"role": "user", "content": "  "}]])
def test_an_empty_prompt_is_refused_before_the_model_loads_naming_its_index(tmp_path, no_model_load, prompt):
    if prompt:
        # The calculator's `reset` returns nothing, so it cannot supply the instruction.
        with pytest.raises(UserInputError, match=r"Row 3 has an empty prompt and environment Calculator.reset return"):
            run(tmp_path, calc_rows(tmp_path, 3, prompt=prompt))
    else:
        with pytest.raises(PreflightError, match=r"row 3: the prompt has no message"):
            run(tmp_path, calc_rows(tmp_path, 3, prompt=prompt))
    # Without an environment nothing could supply it.
    rows = [{"prompt": [{"role": "user", "content": f"{i} + 1?"}], "ground_truth": str(i + 1)} for i in range(6)]
    rows[3]["prompt"] = prompt
    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(PreflightError, match=r"row 3: the prompt (is empty \(with no `environment`|has no message)"):
        run(tmp_path, str(path), "--environment", "", "--reward_funcs", "accuracy", "--dataset_format", "auto")


def test_a_prompt_longer_than_the_context_leaves_room_for_is_refused(tmp_path, no_model_load):
    long = [{"role": "user", "content": "add these: " + " + ".join(str(i) for i in range(1500))}]
    match = r"row 2: the prompt is \d+ tokens, longer than 1792 \(max_position_embeddings 2048 - max_completion_length 256\)"
    with pytest.raises(PreflightError, match=match):
        run(tmp_path, calc_rows(tmp_path, 2, prompt=long))


def test_the_shipped_rows_pass(tmp_path, monkeypatch):
    class Built(Exception):
        pass

    def build(self, *args, **kwargs):
        raise Built(len(kwargs["train_dataset"]))

    monkeypatch.setattr(GEARTrainer, "__init__", build)
    with pytest.raises(Built, match="6"):
        run(tmp_path, calc_rows(tmp_path, 0))
