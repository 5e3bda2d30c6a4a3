"""The README's Python quickstart runs as written (issue 22): only its `output_dir` is pointed at a temporary folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def quickstart() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- quickstart -->\n```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README lost its quickstart block"
    return match.group(1)


def test_the_quickstart_is_short():
    assert len(quickstart().strip().splitlines()) <= 30


@pytest.mark.slow
def test_the_python_quickstart_trains(tmp_path):
    code = quickstart()
    assert '"outputs/quickstart"' in code
    namespace: dict = {}
    source = code.replace('"outputs/quickstart"', repr(str(tmp_path)))
    exec(compile(source, "README quickstart", "exec"), namespace)  # noqa: S102 - the README's own code
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 2
    tools = sorted(tool.__name__ for tool in trainer._env_tools[None])
    assert tools == ["add"]  # `reset` is not a tool
    assert any("rewards/total_reached/mean" in entry for entry in trainer.state.log_history)  # the reward object ran
