"""Where a study's report goes and what it records of where it ran.

Every report carries its provenance (`provenance`: the machine, the commit, this invocation's wall seconds; cost in
CPU seconds is recorded per job by `bench.harness.jobs`), and is written as `<name>.json`, `<name>.md` (a table under
the report's title) and `<name>.png` by `write_results`. `rewrite_from_json` redraws the Markdown (and, optionally, the
PNG) of a committed report from its JSON alone, with no training: each study's `--report-only`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from . import REPO_ROOT


def finite(value):
    """`value` with every NaN or infinite float inside it (in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


def dumps(report: dict) -> str:
    """A report as strict JSON (indent 1, a final newline), which any JSON parser reads: Python's `json` writes NaN and
    Infinity, which are not JSON. A value with no finite reading (the mean of no seeds, a bootstrap bound whose
    resamples had a denominator <= 0, so the interval is unbounded on that side) is written as null."""
    return json.dumps(finite(report), indent=1, allow_nan=False) + "\n"


def provenance(wall_start: float) -> dict:
    """What every study report records of where it ran: the machine, the commit (None outside git) and this
    invocation's wall seconds since `wall_start` (a `time.perf_counter()` reading)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                            check=False)  # fmt: skip
    return {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "git": commit.stdout.strip() or None,
        "wall_s_this_invocation": round(time.perf_counter() - wall_start, 1),
    }


def markdown_page(report: dict, table_fn) -> str:
    """A report's Markdown file: its title, then `table_fn(report)`."""
    return f"# {report['title']}\n\n{table_fn(report)}\n"


def write_results(report: dict, out_dir: Path, name: str, plot_fn, table_fn, log=print) -> str:
    """`name`.json, .png (drawn by `plot_fn(report, path)`) and .md (`table_fn(report)` under the report's title) in
    `out_dir`; logs the table and returns it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=1))
    plot_fn(report, out_dir / f"{name}.png")
    table = table_fn(report)
    (out_dir / f"{name}.md").write_text(f"# {report['title']}\n\n{table}\n")
    log(table)
    return table


def rewrite_from_json(json_path: Path, plot_fn, table_fn, *, png: bool = True, log=print) -> dict:
    """Rewrite the .md (and with `png` the .png) beside a committed report `json_path` from the JSON alone: what a
    study's `--report-only` does. Returns the report."""
    json_path = Path(json_path)
    report = json.loads(json_path.read_text())
    json_path.with_suffix(".md").write_text(markdown_page(report, table_fn))
    if png:
        plot_fn(report, json_path.with_suffix(".png"))
    log(f"rewrote {json_path.with_suffix('.md')}" + (" and .png" if png else "") + f" from {json_path.name}")
    return report


def interval_panels(panels: list[dict], title: str, path: Path) -> None:
    """One panel a cell, one row an arm: a mean with its 95% interval as an error bar, 0 as a solid line.

    Args:
        panels: each {"title": str, "rows": [{"label", "record" ({mean, ci_low, ci_high}), "color", "marker"}],
            optional "line": (x, label), a dotted reference line with a legend entry}.
        title: the figure's title. path: where the PNG goes.
    """
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    for ax, panel in zip(axes.flat, panels, strict=True):
        rows = panel["rows"]
        for y, row in enumerate(rows):
            rec = row["record"]
            low = 0.0 if math.isnan(rec["ci_low"]) else rec["mean"] - rec["ci_low"]
            high = 0.0 if math.isnan(rec["ci_high"]) else rec["ci_high"] - rec["mean"]
            ax.errorbar([rec["mean"]], [y], xerr=[[low], [high]], fmt=row.get("marker", "o"),
                        color=row.get("color", "tab:blue"), capsize=3, ms=4, zorder=3)  # fmt: skip
        if panel.get("line"):
            x, label = panel["line"]
            ax.axvline(x, color="tab:green", ls=":", lw=1, label=label)
            ax.legend(fontsize=7, loc="lower left")
        ax.axvline(0, color="black", lw=0.8)
        ax.set_yticks(range(len(rows)), [row["label"] for row in rows], fontsize=7)
        ax.set_ylim(len(rows) - 0.5, -0.7)
        ax.set_title(panel["title"], fontsize=9)
        ax.set_xlabel("held-out accuracy - GRPO, 95% t-interval", fontsize=8)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(nbins=5))
        ax.grid(alpha=0.3, axis="x")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
