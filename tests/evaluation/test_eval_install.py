"""A GPU install that evaluates (issue 52, item 2): the `eval` extra holds what the bfcl-eval modules gear_trl runs
import (bfcl-eval itself goes in `--no-deps`, as `make install-eval` does), every doc's GPU install step installs
both, and ACEBench is cached ahead of an offline evaluation by `python -m gear_trl.data.acebench`, whose command a
node that cannot reach GitHub is told to run instead of failing with a bare URLError."""

from __future__ import annotations

import ast
import configparser
import importlib.util
import json
import os
import re
import sys
import urllib.error
from pathlib import Path

import pytest

from gear_trl.data import acebench
from gear_trl.evaluation.benchmarks import BFCL_EVAL_REQUIREMENT, get_preset
from gear_trl.inputs.errors import UserInputError

REPO = Path(__file__).resolve().parents[2]

# --- ACEBench offline ------------------------------------------------------------------------------------------------


def fake_checkout(root: Path) -> Path:
    """An ACEBench-shaped folder written for this test (one row and answer a category; not ACEBench's data)."""
    prompt = root / acebench.PROMPT_FILE
    prompt.parent.mkdir(parents=True)
    prompt.write_text(
        'SYSTEM_PROMPT_FOR_NORMAL_DATA_EN = "normal {time} {function}"\n'
        'SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN = "preference {profile} {function}"\n'
        'SYSTEM_PROMPT_FOR_SPECIAL_DATA_EN = "special {time} {function}"\n'
        'USER_PROMPT_EN = "question: {question}"\n'
    )
    data = root / acebench.DATA_DIR
    (data / "possible_answer").mkdir(parents=True)
    for category in acebench.NON_INTERACTIVE_CATEGORIES:
        row_id = f"{category}_0_0" if category.startswith("normal_multi_turn") else f"{category}_0"
        row = {"id": row_id, "question": f"ask {category}", "function": [{"name": "f"}], "time": "2024"}
        (data / f"data_{category}.json").write_text(json.dumps(row) + "\n")
        (data / "possible_answer" / f"data_{category}.json").write_text(
            json.dumps({"id": row_id, "ground_truth": {"f": {}}}) + "\n"
        )
    return root


def serve(checkout: Path, fetched: list):
    prefix = f"https://raw.githubusercontent.com/ACEBench/ACEBench/{acebench.ACEBENCH_COMMIT}/"

    def urlopen(url, timeout=None):
        assert url.startswith(prefix)
        fetched.append(url)
        return open(checkout / url[len(prefix) :], "rb")

    return urlopen


def unreachable(url, timeout=None):
    raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")


def test_offline_without_a_cache_names_the_prepare_command_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(acebench.urllib.request, "urlopen", unreachable)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    preset = get_preset("acebench_atom_bool")
    with pytest.raises(UserInputError) as raised:
        acebench.load_acebench(preset.dataset, preset.split)
    message = str(raised.value)
    root = acebench.default_cache_dir()
    assert "\n" not in message and root.startswith(str(tmp_path / "xdg"))
    assert f"python -m gear_trl.data.acebench --cache-dir {root}" in message
    assert "URLError" in message and "31 of 31 files missing" in message


def test_other_download_failures_get_the_same_message(tmp_path, monkeypatch):
    def timeout(url, timeout=None):
        raise TimeoutError("timed out")

    monkeypatch.setattr(acebench.urllib.request, "urlopen", timeout)
    with pytest.raises(UserInputError, match=r"TimeoutError: timed out\). Run `python -m gear_trl.data.acebench"):
        acebench.download(cache_dir=str(tmp_path / "cache"))


def test_prepare_fills_the_cache_that_an_offline_evaluation_then_reads(tmp_path, monkeypatch, capsys):
    checkout = fake_checkout(tmp_path / "checkout")
    fetched = []
    monkeypatch.setattr(acebench.urllib.request, "urlopen", serve(checkout, fetched))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = acebench.main([])  # the default cache: what the presets read
    assert root == acebench.default_cache_dir() and len(fetched) == 31
    assert "the acebench_* presets read it from there" in capsys.readouterr().out

    monkeypatch.setattr(acebench.urllib.request, "urlopen", unreachable)  # now offline
    preset = get_preset("acebench_parallel")
    rows = list(acebench.load_acebench(preset.dataset, preset.split))
    assert rows[0]["prompt"][-1]["content"] == "question: ask normal_single_turn_parallel_function"

    elsewhere = str(tmp_path / "copied")  # a folder of one's own is read as --dataset
    monkeypatch.setattr(acebench.urllib.request, "urlopen", serve(checkout, fetched))
    acebench.main(["--cache-dir", elsewhere])
    assert f"pass --dataset {elsewhere}" in capsys.readouterr().out
    monkeypatch.setattr(acebench.urllib.request, "urlopen", unreachable)
    assert list(acebench.load_acebench(elsewhere, preset.split)) == rows


def test_the_module_runs_as_a_command_and_fails_in_one_line():
    import subprocess

    env = {**os.environ, "XDG_CACHE_HOME": "/nonexistent-gear-test", "PYTHONPATH": str(REPO)}
    code = (
        "import urllib.request, urllib.error, runpy, sys\n"
        "def down(url, timeout=None): raise urllib.error.URLError('offline')\n"
        "urllib.request.urlopen = down\n"
        "sys.argv = ['acebench', '--cache-dir', '/nonexistent-gear-test/a']\n"
        "runpy.run_module('gear_trl.data.acebench', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: ACEBench is not on the Hugging Face Hub") and "Traceback" not in done.stderr


# --- the eval extra and the GPU install steps ------------------------------------------------------------------------


def _requirement_names(lines: str) -> set[str]:
    return {
        re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0].lower() for line in lines.splitlines() if line.strip()
    }


def _bfcl_modules_run() -> set[str]:
    """The bfcl_eval modules gear_trl imports (statements and `importlib.import_module("bfcl_eval...")` strings) and
    the multi-turn API classes' modules."""
    from gear_trl.envs.bfcl_official import MULTI_TURN_CLASSES

    found = set()
    for path in (REPO / "gear_trl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bfcl_eval"):
                found.add(node.module)
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("bfcl_eval.")
            ):
                found.add(node.value)
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    return found | {CLASS_FILE_PATH_MAPPING[name] for name in MULTI_TURN_CLASSES}


def _third_party_imports(modules: set[str]) -> set[str]:
    """Top-level names of what `modules` import, following bfcl_eval's own imports; the vendor-client registry
    `bfcl_eval.constants.model_config`, which gear_trl stands in for (gear_trl.rewards.bfcl_ast), is not followed."""
    base = Path(importlib.util.find_spec("bfcl_eval").origin).parent.parent
    seen, third, stack = set(), set(), sorted(modules)
    while stack:
        name = stack.pop()
        if name in seen or name == "bfcl_eval.constants.model_config":
            continue
        seen.add(name)
        path = base.joinpath(*name.split("."))
        path = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
        if not path.is_file():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            for imported in names:
                if imported.startswith("bfcl_eval"):
                    stack.append(imported)
                elif imported.split(".")[0] not in sys.stdlib_module_names:
                    third.add(imported.split(".")[0].lower())
    return third


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval is not installed")
def test_the_eval_extra_holds_what_the_bfcl_modules_run_import_and_nothing_else():
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    extra = _requirement_names(config["options.extras_require"]["eval"])
    required = _requirement_names(config["options"]["install_requires"])
    imported = _third_party_imports(_bfcl_modules_run())
    assert imported, "no third-party imports found: the walk is broken"
    assert imported - required == extra, (imported, extra)


def test_make_install_and_install_eval_install_the_eval_extra_and_the_pinned_bfcl_eval():
    makefile = (REPO / "Makefile").read_text()
    assert f"BFCL_EVAL ?= {BFCL_EVAL_REQUIREMENT}\n" in makefile
    for target in ("install", "install-eval"):
        recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(1)
        assert re.search(r'pip install --quiet -e "\.\[[^\]]*\beval\b', recipe), target
        assert 'pip install --quiet --no-deps "$(BFCL_EVAL)"' in recipe, target
    assert "torch" not in re.search(r"^install-eval:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE).group(
        1
    )  # the GPU's own


GPU_INSTALL_DOCS = ["README.md", "docs/getting-started.md", "docs/reproducing.md", "docs/evaluation.md"]


def _docs() -> list[Path]:
    return [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md") if "results" not in p.parts)]


def test_every_docs_gpu_install_step_installs_the_eval_extra_and_bfcl_eval():
    """A GPU install step is a `pip install torch` without a version pin (the CPU pin is `make install`'s)."""
    with_step = []
    for path in _docs():
        text = path.read_text()
        if not re.search(r"pip install torch(?!==)\b", text):
            continue
        with_step.append(str(path.relative_to(REPO)))
        extras = re.findall(r"pip install -e '\.\[([^\]]*)\]'", text)
        assert any("eval" in e.split(",") for e in extras), f"{path}: its GPU install misses the eval extra"
        assert f"pip install --no-deps {BFCL_EVAL_REQUIREMENT}" in text, f"{path}: its GPU install misses bfcl-eval"
    assert sorted(with_step) == sorted(GPU_INSTALL_DOCS)
    for page in ("docs/tool-use.md", "docs/recipes.md"):  # the pages that train the runs the tool benchmarks score
        assert "make install-eval" in (REPO / page).read_text(), page
