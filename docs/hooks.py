"""MkDocs hooks: the pages that must not drift from the code or the committed results are filled in at build time.

A page holds a marker line, `<!-- generated: NAME -->`, and `GENERATORS[NAME]()` returns the Markdown that replaces
it: the results tables from the committed reports in `bench/results/<study>/` (each study writes its Markdown and
its docs sections from its JSON; `python -m bench.harness.sections` and the studies' `--report-only` rewrite them, and
tests check they match), read as files: the docs build imports no study. The figures in `bench/results/` are added
to the site under `results/figures/<study>/`, so a page shows the committed PNG, never a copy.

The configuration reference (`COMMITTED`) is generated too, from `GEARConfig`'s field help, but committed in its page
between `<!-- begin committed: NAME -->` and `<!-- end committed: NAME -->`, so that docs/configuration.md reads whole
on GitHub; tests/project/test_docs.py regenerates it and fails when it differs. Refresh it with

    python docs/hooks.py --write        (or: make docs-config)
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
FIGURES = "results/figures"  # where bench/results/<study>/*.png appear in the site, as <study>/*.png
MARKER = re.compile(r"^<!-- generated: ([a-z_]+) -->$", re.MULTILINE)
REFRESH = "python docs/hooks.py --write"


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if isinstance(value, str) and len(value) > 40:
        return "see below"
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def gear_fields() -> list[dataclasses.Field]:
    """GEARConfig's own fields, in declaration order: those GRPOConfig does not have."""
    from trl import GRPOConfig

    from gear_trl import GEARConfig

    inherited = {field.name for field in dataclasses.fields(GRPOConfig)}
    return [field for field in dataclasses.fields(GEARConfig) if field.name not in inherited]


def config_reference() -> str:
    """A table of every GEARConfig field: name, default and its `metadata["help"]`, as the command line shows it."""
    lines = ["| field | default | meaning |", "|---|---|---|"]
    for field in gear_fields():
        help_text = " ".join(field.metadata.get("help", "").split()).replace("|", "\\|")
        lines.append(f"| `{field.name}` | {_default(field)} | {help_text} |")
    return "\n".join(lines)


def _demote(section: str) -> str:
    """A README-style section as the body of its own page: headings one level down, figures from the site's folder."""
    section = re.sub(r"^(#+) ", r"#\1 ", section, flags=re.MULTILINE)
    return section.replace("(bench/results/", "(@FIGURES@/")


def teacher_sweep() -> str:
    """bench/teacher_sweep.py's section, from bench/results/teacher_sweep/teacher_sweep.json (its title is the page's)."""
    section = (RESULTS / "teacher_sweep" / "section.md").read_text(encoding="utf-8")
    return _demote(section.split("\n", 1)[1].lstrip("\n"))


def _learning_table(name: str) -> str:
    """A learning report's table: its committed Markdown (bench/learning.py writes it from the JSON) below the title."""
    return (RESULTS / name).read_text(encoding="utf-8").split("\n", 2)[2].strip("\n")


def performance() -> str:
    """bench/overhead.py --readme-table on the committed CPU run."""
    return (RESULTS / "overhead" / "cpu_summary.md").read_text(encoding="utf-8").rstrip("\n")


def performance_cuda() -> str:
    """bench/overhead.py --readme-table on the committed CUDA run (one H100, Qwen3-4B's shape)."""
    return (RESULTS / "overhead" / "cuda_summary.md").read_text(encoding="utf-8").rstrip("\n")


def quickstart() -> str:
    """The README's Python quickstart, the block tests/project/test_readme.py runs."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- quickstart -->\n(```python\n.*?```)", text, re.DOTALL)
    return match.group(1)


def changelog() -> str:
    """CHANGELOG.md at the repository's root, below the page's own title."""
    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    return text.split("\n", 1)[1].lstrip("\n")


GENERATORS = {
    "quickstart": quickstart,
    "changelog": changelog,
    "teacher_sweep": teacher_sweep,
    "learning_math": lambda: _learning_table("learning/math.md"),
    "learning_math_knobs": lambda: _learning_table("learning/math_knobs.md"),
    "learning_tools": lambda: _learning_table("learning/tools.md"),
    "learning_tools_knobs": lambda: _learning_table("learning/tools_knobs.md"),
    "performance": performance,
    "performance_cuda": performance_cuda,
}


def credit_modes() -> str:
    """The credit-mode registry as a table (`gear_trl.credit.modes.modes_table`)."""
    from gear_trl.credit.modes import modes_table

    return modes_table()


def teacher_kinds() -> str:
    """The teacher-kind registry as a table."""
    from gear_trl.teacher.kinds import _REGISTRY

    lines = ["| `teacher` | weights it reads | its options | what it is |", "|---|---|---|---|"]
    for kind in _REGISTRY.values():
        options = ", ".join(f"`{name}`" for name in kind.options) or "-"
        lines.append(f"| `{kind.name}` | {kind.weights} | {options} | {kind.summary} |")
    return "\n".join(lines)


COMMITTED = {
    "configuration.md": {
        "config_reference": config_reference,
        "credit_modes": credit_modes,
        "teacher_kinds": teacher_kinds,
    }
}
"""Generated blocks committed in their page (a page's path under docs/: {block name: generator})."""


def committed_block(name: str) -> re.Pattern:
    """The committed block `name` of a page: its begin line, body and end line."""
    return re.compile(
        rf"(^<!-- begin committed: {name} -->\n)(.*?)(^<!-- end committed: {name} -->$)", re.MULTILINE | re.DOTALL
    )


def refreshed(page: str, text: str) -> str:
    """`text` of docs/`page` with each of its committed blocks regenerated (a block missing from it raises)."""
    for name, generator in COMMITTED.get(page, {}).items():
        body = generator()
        text, found = committed_block(name).subn(lambda m, body=body: m.group(1) + body + "\n" + m.group(3), text)
        if found != 1:
            raise ValueError(f"docs/{page} has no committed block {name!r} (begin and end lines).")
    return text


def stale_pages() -> list[str]:
    """The pages whose committed blocks differ from what their generators give now."""
    stale = []
    for page in COMMITTED:
        text = (REPO / "docs" / page).read_text(encoding="utf-8")
        if refreshed(page, text) != text:
            stale.append(page)
    return stale


def render(markdown: str, page_uri: str = "index.md") -> str:
    """`markdown` with each marker line replaced by its generator's output (an unknown name raises), the figures
    linked relative to the page at `page_uri`."""
    figures = posixpath.relpath(FIGURES, posixpath.dirname(page_uri) or ".")
    markdown = MARKER.sub(lambda match: GENERATORS[match.group(1)]().replace("@FIGURES@", figures), markdown)
    # The comments around a committed table or cell (docs/results_blocks.py's BLOCK) are invisible on the site, and a
    # cell's `[row][column]` would read to mkdocs-autorefs as a reference link it cannot resolve: keep the values only.
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from docs.results_blocks import BLOCK

    return BLOCK.sub(lambda match: match.group(4), markdown)


# MkDocs event hooks ---------------------------------------------------------------------------------------------------


def on_files(files, config):
    from mkdocs.structure.files import File

    for path in sorted(RESULTS.glob("*/*.png")):
        files.append(File.generated(config, f"{FIGURES}/{path.parent.name}/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown, page, config, files):
    return render(markdown, page.file.src_uri)


def main(argv: list[str] | None = None) -> int:
    """`--write` regenerates the committed blocks in their pages; `--check` (the default) says which are stale."""
    import argparse

    parser = argparse.ArgumentParser(prog="python docs/hooks.py", description=main.__doc__)
    parser.add_argument("--write", action="store_true", help="Rewrite the stale pages.")
    parser.add_argument("--check", action="store_true", help="Exit 1 if a page is stale (the default).")
    args = parser.parse_args(argv)
    stale = stale_pages()
    if args.write:
        for page in stale:
            path = REPO / "docs" / page
            path.write_text(refreshed(page, path.read_text(encoding="utf-8")), encoding="utf-8")
            print(f"rewrote docs/{page}")
        return 0
    for page in stale:
        print(f"docs/{page} is out of date: run `{REFRESH}`")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
