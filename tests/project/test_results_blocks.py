"""Every figure the results pages, the README and the guides show is a generated table, or a cell read from one
(docs/results_blocks.py): regenerated here from the committed JSON and compared with what the files hold. The prose
around them is written by hand and tested by no one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.utils import load_file

REPO = Path(__file__).resolve().parents[2]
blocks = load_file(REPO / "docs" / "results_blocks.py", "gear_docs_results_blocks")


def test_every_generated_block_is_what_the_committed_json_gives():
    used = set()
    stale = []
    for name in blocks.FILES:
        text = (REPO / name).read_text(encoding="utf-8")
        used |= {match.group(1) for match in blocks.BLOCK.finditer(text)}
        if blocks.render(text) != text:
            stale.append(name)
    assert not stale, f"generated blocks out of date in {stale}: run `{blocks.REFRESH}` and commit the result"
    assert used == set(blocks.TABLES), f"tables no file uses: {set(blocks.TABLES) - used}"
    for key, path in blocks.PATHS.items():
        assert (REPO / path).is_file(), f"PATHS[{key!r}] = {path}: no such file"


def test_a_quoted_figure_is_one_cell_of_one_row(monkeypatch):
    table = blocks.Table(
        ["arm", "seeds", "held-out - GRPO", "Holm p", "reward - GRPO", "Holm p"],
        [["`x`", "0-7", "+1", "0.1", "+2", "0.2"], ["`x`", "8-15", "+3", "0.3", "+4", "0.4"]],
    )
    assert table.cell("x & 8-15", "held-out") == "+3"  # the one header that starts so
    assert table.cell("x & 0-7", "reward - GRPO > Holm p") == "0.2"  # the first `Holm p` after the reward
    for row, column in (("x", "held-out"), ("x & 0-7", "Holm p"), ("y", "held-out"), ("x & 0-7", "share")):
        with pytest.raises(KeyError):
            table.cell(row, column)
    stale = "<!-- gen:t[x & 0-7][reward - GRPO] -->+9<!-- /gen --> and\n<!-- gen:t -->\n| old |\n<!-- /gen -->"
    monkeypatch.setattr(blocks, "TABLES", {"t": lambda: table})
    fresh = blocks.render(stale)
    assert fresh.startswith("<!-- gen:t[x & 0-7][reward - GRPO] -->+2<!-- /gen --> and\n<!-- gen:t -->\n| arm |")
    assert fresh.endswith(f"{table.markdown()}\n<!-- /gen -->") and blocks.render(fresh) == fresh
