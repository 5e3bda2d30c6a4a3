"""Every figure the results pages, the README and the guides quote is a generated block (docs/results_blocks.py):
regenerated here from the committed JSON and compared with what the files hold. This one test replaces the tests
that matched sentences of the docs against the JSON one by one."""

from __future__ import annotations

from pathlib import Path

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
    assert used == set(blocks.BLOCKS), f"blocks no file uses: {set(blocks.BLOCKS) - used}"
    for key, path in blocks.PATHS.items():
        assert (REPO / path).is_file(), f"PATHS[{key!r}] = {path}: no such file"
