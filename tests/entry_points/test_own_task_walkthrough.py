"""docs/own-task.md's first section runs as written (issue 76, item 3): its files are taken from the page, not copied
here, and its commands are run as a user runs them, with the installed `gear-trl-train` from the task's own folder
(which is not on PYTHONPATH: the console script must import `my_rewards` from the folder it runs in)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "own-task.md"


def walkthrough() -> dict[str, str]:
    """{file name or "run": block} for every block the page marks `<!-- walkthrough: NAME -->`."""
    found = re.findall(r"<!-- walkthrough: (\S+) -->\n```\w*\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    return dict(found)


def test_the_page_holds_ten_rows_a_reward_a_cpu_recipe_and_the_command():
    blocks = walkthrough()
    assert set(blocks) == {"my_task/answers.jsonl", "my_task/my_rewards.py", "my_task/recipe.yaml", "run"}
    assert len(blocks["my_task/answers.jsonl"].splitlines()) == 10
    import yaml

    recipe = yaml.safe_load(blocks["my_task/recipe.yaml"])
    assert recipe["use_cpu"] is True and recipe["bf16"] is False and recipe["max_steps"] == 2
    assert recipe["dataset_format"] == "columns"
    assert "renames the `answer` column to `ground_truth`" in " ".join(PAGE.read_text(encoding="utf-8").split())


@pytest.mark.slow
def test_the_walkthrough_runs_as_written_on_cpu(tmp_path):
    script = Path(sys.executable).parent / "gear-trl-train"
    if not script.exists():
        pytest.skip(f"gear-trl-train is not installed beside {sys.executable} (pip install -e .)")
    blocks = walkthrough()
    for name, text in blocks.items():
        if name != "run":
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tiny-qwen3").symlink_to(ROOT / "data" / "tiny-qwen3")  # the clone's model
    env = {
        **os.environ,
        "PATH": f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),  # gear_trl from this checkout; my_task is not on it
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        ["bash", "-e", "-c", blocks["run"]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    saved = tmp_path / "my_task" / "outputs" / "my-task"
    assert (saved / "README.md").is_file(), output[-3000:]
    assert "Model saved to outputs/my-task" in output
    # the tiny model's reward is 0 throughout, and the run says so, without the hint for lists never read
    assert "Reward function 'exact_answer' returned 0 for every one of the 8 completions" in output, output[-3000:]
    assert "never read a message's fields" not in output


def reads_answer(completions, answer, **kwargs):
    return [0.0 for _ in completions]


def test_a_reward_asking_for_the_renamed_column_is_told_its_new_name(tmp_path):
    from gear_trl.inputs.preflight import reward_parameter_problems
    from gear_trl.train import moved_columns, parse_args

    recipe = tmp_path / "recipe.yaml"
    columns = ["prompt", "ground_truth", "reference_solution"]
    for fmt, moved in [
        ("columns", {"question": "prompts", "answer": "ground_truth"}),
        ("gsm8k", {"question": "prompts", "answer": "ground_truth"}),
        ("trl", {}),
    ]:
        recipe.write_text(f"dataset_format: {fmt}\nuse_cpu: true\nbf16: false\noutput_dir: {tmp_path / 'out'}\n")
        script_args, training_args, _ = parse_args(["--config", str(recipe)])
        assert moved_columns(script_args, training_args.ground_truth_column) == moved
    assert moved_columns(script_args, "truth") == {}
    (problem,) = reward_parameter_problems([reads_answer], columns, moved={"answer": "ground_truth"})
    assert problem.endswith(
        "The dataset adapter does not keep the columns it reads: take `ground_truth` instead of 'answer'."
    )
    (problem,) = reward_parameter_problems([reads_answer], columns)
    assert "instead of" not in problem


def test_the_recipe_without_its_cpu_lines_says_which_to_add(tmp_path):
    import torch

    from gear_trl.inputs.preflight import PreflightError
    from gear_trl.train import parse_args

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: bf16 is supported")
    recipe = walkthrough()["my_task/recipe.yaml"]
    gpu_recipe = "\n".join(line for line in recipe.splitlines() if not line.startswith(("use_cpu", "bf16")))
    (tmp_path / "recipe.yaml").write_text(gpu_recipe.replace("outputs/my-task", str(tmp_path / "out")))
    with pytest.raises(PreflightError, match=r"No GPU here.*add `use_cpu: true` and `bf16: false` to the recipe"):
        parse_args(["--config", str(tmp_path / "recipe.yaml")])
