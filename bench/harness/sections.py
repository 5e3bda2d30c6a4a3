"""The documentation's sections that studies write from their JSON, committed beside the JSON under
`bench/results/<study>/`, so that the docs build reads files and never imports a study.

    python -m bench.harness.sections           # rewrite every section from its JSON
    python -m bench.harness.sections --check   # exit 1 where a committed section differs (tests run this check)
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

from . import RESULTS_DIR

SECTIONS = {
    "teacher_sweep/section.md": ("teacher_sweep/teacher_sweep.json", "bench.teacher_sweep:readme_section"),
    "overhead/cpu_summary.md": ("overhead/cpu.json", "bench.overhead_report:readme_table"),
    "overhead/cuda_summary.md": ("overhead/cuda.json", "bench.overhead_report:readme_table"),
}
"""Committed section (under bench/results/) -> (the JSON it is written from, the study function that writes it)."""


def render(name: str) -> str:
    source, writer = SECTIONS[name]
    module, _, function = writer.partition(":")
    text = getattr(importlib.import_module(module), function)(json.loads((RESULTS_DIR / source).read_text()))
    return text.rstrip("\n") + "\n"


def stale() -> list[str]:
    """The committed sections that differ from what their JSON gives now."""
    return [name for name in SECTIONS if (RESULTS_DIR / name).read_text() != render(name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.harness.sections", description=__doc__)
    parser.add_argument("--check", action="store_true", help="Exit 1 where a committed section is stale.")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for name in found:
            print(f"bench/results/{name} is out of date: run `python -m bench.harness.sections`")
        return 1 if found else 0
    for name in SECTIONS:
        (RESULTS_DIR / name).write_text(render(name))
        print(f"wrote bench/results/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
