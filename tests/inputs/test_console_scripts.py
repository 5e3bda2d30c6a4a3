"""The installed console scripts (`gear-trl-train`, ...) import the user's plug-ins from the folder they run in, as
`python -m gear_trl.train` does (issue 76, item 2), and their help prints as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gear_trl.inputs.plugins import import_from_current_folder

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def console_script(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed beside {sys.executable} (pip install -e .)")
    return path


def run_script(name: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The installed script, importing gear_trl from this checkout (PYTHONPATH names the checkout, never `cwd`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "COLUMNS": "400"}
    return subprocess.run(
        [str(console_script(name)), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_gear_trl_train_imports_a_reward_from_the_folder_it_runs_in(tmp_path):
    (tmp_path / "my_rewards.py").write_text(
        "def exact_answer(completions, ground_truth, **kwargs):\n"
        '    return [float(t in c[-1]["content"]) for c, t in zip(completions, ground_truth)]\n'
    )
    (tmp_path / "recipe.yaml").write_text(
        "model_name_or_path: ./no-such-model\n"  # stops the run at the preflight, after the plug-ins are imported
        "dataset_name: data.jsonl\n"
        "reward_funcs: [my_rewards:exact_answer]\n"
        "use_cpu: true\nbf16: false\nreport_to: none\noutput_dir: out\n"
    )
    assert str(tmp_path) not in os.environ.get("PYTHONPATH", "")
    done = run_script("gear-trl-train", ["--config", "recipe.yaml"], tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    # the preflight got as far as the model, and the reward imported: only the model is reported
    assert "`model_name_or_path`: no such local folder: './no-such-model'" in done.stderr
    assert "my_rewards" not in done.stderr, done.stderr[-2000:]


def test_gear_trl_table_help_prints_a_single_percent_sign(tmp_path):
    done = run_script("gear-trl-table", ["--help"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "paired 95% intervals" in done.stdout
    assert "%%" not in done.stdout


def test_the_current_folder_goes_first_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(BIN), *[p for p in sys.path if p not in ("", str(tmp_path))]])
    import_from_current_folder()
    assert sys.path[0] == str(tmp_path)
    import_from_current_folder()
    assert sys.path.count(str(tmp_path)) == 1
    # already there as '' (python -c, the interactive prompt): not added again
    monkeypatch.setattr(sys, "path", ["", str(BIN)])
    import_from_current_folder()
    assert sys.path == ["", str(BIN)]
