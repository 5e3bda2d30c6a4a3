"""The docs site's generated pages (docs/hooks.py) and the README's links into them.

`mkdocs build --strict` (`make docs`, run by CI) checks links, anchors and the nav; these tests check what it cannot:
that the configuration reference lists every GEAR field with its help, that each results page is filled from the
committed JSON, and that the README (outside the site) links to pages that exist. The results pages' own tables are
generated blocks, checked by tests/project/test_results_blocks.py.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from trl import GRPOConfig

from gear_trl import GEARConfig
from tests.utils import load_file

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS = REPO_ROOT / "docs"
README = REPO_ROOT / "README.md"


@pytest.fixture(scope="module")
def hooks():
    return load_file(DOCS / "hooks.py", "gear_docs_hooks")


def pages() -> dict[str, str]:
    return {path.relative_to(DOCS).as_posix(): path.read_text(encoding="utf-8") for path in DOCS.rglob("*.md")}


def test_the_config_reference_lists_every_gear_field_with_its_help(hooks):
    table = hooks.config_reference()
    rows = {line.split("|")[1].strip(" `") for line in table.splitlines()[2:]}
    grpo = {field.name for field in dataclasses.fields(GRPOConfig)}
    ours = [field for field in dataclasses.fields(GEARConfig) if field.name not in grpo]
    assert {"credit", "onset_threshold", "teacher", "gigpo_omega"} <= {field.name for field in ours}
    assert rows == {field.name for field in ours}
    for field in ours:
        assert field.metadata.get("help"), f"GEARConfig.{field.name} has no help text"
        help_text = " ".join(field.metadata["help"].split()).replace("|", "\\|")
        row = next(line for line in table.splitlines() if line.startswith(f"| `{field.name}` |"))
        assert help_text in row, field.name
    assert "| `onset_threshold` | `0.1` |" in table


def test_the_committed_config_reference_is_the_generated_one(hooks):
    """docs/configuration.md holds the table itself (it reads whole on GitHub); it must be what GEARConfig gives now."""
    assert hooks.stale_pages() == [], f"docs/configuration.md is out of date: run `{hooks.REFRESH}` (make docs-config)"
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert hooks.config_reference() in page


def test_a_stale_committed_block_is_found_and_rewritten(hooks, tmp_path, monkeypatch):
    stale = (
        "intro\n"
        + "".join(
            f"<!-- begin committed: {name} -->\n| old |\n<!-- end committed: {name} -->\n"
            for name in hooks.COMMITTED["configuration.md"]
        )
        + "end\n"
    )
    fresh = hooks.refreshed("configuration.md", stale)
    assert fresh != stale and hooks.config_reference() in fresh and fresh.endswith("end\n")
    assert hooks.refreshed("configuration.md", fresh) == fresh
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "configuration.md").write_text(stale, encoding="utf-8")
    monkeypatch.setattr(hooks, "REPO", tmp_path)
    assert hooks.stale_pages() == ["configuration.md"] and hooks.main([]) == 1
    assert hooks.main(["--write"]) == 0 and hooks.stale_pages() == []
    with pytest.raises(ValueError, match="no committed block"):
        hooks.refreshed("configuration.md", "no block here")


def test_every_marker_names_a_generator_and_every_page_renders(hooks):
    markers = {name for text in pages().values() for name in hooks.MARKER.findall(text)}
    assert markers == set(hooks.GENERATORS), "a generator no page uses, or a marker no generator fills"
    for uri, text in pages().items():
        rendered = hooks.render(text, uri)
        assert not hooks.MARKER.search(rendered) and "@FIGURES@" not in rendered, uri
    with pytest.raises(KeyError):
        hooks.render("<!-- generated: no_such_table -->")


def test_the_site_drops_the_comments_around_committed_cells_and_keeps_their_values(hooks):
    # A cell's `[row][column]` left in the page is read by mkdocs-autorefs as a reference link it cannot resolve, and
    # --strict fails the docs build on every such cell.
    text = "GEAR's step <!-- gen:performance.table[CPU & tiny][step time] -->1.05x<!-- /gen --> GRPO's\n"
    assert hooks.render(text) == "GEAR's step 1.05x GRPO's\n"
    table = "<!-- gen:horizon.table -->\n| a |\n|---|\n| 1 |\n<!-- /gen -->\n"
    assert hooks.render(table) == "\n| a |\n|---|\n| 1 |\n\n"
    from docs.results_blocks import BLOCK

    for uri, text in pages().items():
        assert not BLOCK.search(hooks.render(text, uri)), uri


def test_results_pages_are_filled_from_the_committed_json(hooks):
    learning = hooks.render(pages()["results/learning.md"], "results/learning.md")
    assert "| `gear` |" in learning and "| `gigpo` |" in learning  # the math and the tool-use tables
    assert "![reward curves and accuracies per credit mode](figures/learning/math.png)" in learning
    performance = hooks.render(pages()["results/performance.md"], "results/performance.md")
    assert "| `step_time` | tiny |" in performance
    # the H100 run, bench/results/overhead/cuda.json
    assert "| `step_time` | qwen3-4b | 1.35 | 1.3 | **no** |" in performance
    sweep = hooks.render(pages()["results/teacher-sweep.md"], "results/teacher-sweep.md")
    assert (
        "](figures/teacher_sweep/teacher_sweep.png)" in sweep
        and "bench/results/teacher_sweep/teacher_sweep.png" not in sweep
    )
    assert not re.search(r"^#{1} ", sweep.split("\n", 1)[1], re.MULTILINE)  # one page title: the section's is demoted


def test_the_readmes_links_into_the_docs_exist():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    assert len(links) >= 10
    for link in links:
        assert (REPO_ROOT / link).is_file(), link
