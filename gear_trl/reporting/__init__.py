"""Reporting: GEAR's credit rendered for people, as an HTML page, a PNG and a table for experiment trackers.

Used by the training callback (`gear_trl.trainer.callbacks.CreditReportCallback`) and by the command line
(`python -m gear_trl.inspect_credit`). It takes decoded token strings and per-token `trace_row` dicts (`trace_rows` makes
them from a `CreditTrace`), so it works without a model, and it imports nothing of gear_trl: the trainer's callback
can use it without a cycle.

    rows.py    a CreditTrace's rollouts as per-token lists; token decoding; summaries and the tracker table
    colors.py  the colour scales both renderings share
    html.py    the HTML page, laid out by templates/credit.html.j2
    png.py     the PNG figure (matplotlib)
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

from .colors import color_scale, weight_color
from .html_page import render_html, render_html_report
from .png import render_png, render_png_report
from .rows import (
    ROLLOUT_CHOICES,
    choose_rollouts,
    credit_table,
    decode_tokens,
    prompt_text,
    rollout_summary,
    trace_rows,
    trainer_tokenizer,
)


def write_report(rollouts: Sequence[tuple[Sequence[str], dict]], out_dir: str, stem: str, title: str):
    """Write `<out_dir>/<stem>.html` and `<stem>.png`; returns both paths (the PNG's is None, with a warning, where
    matplotlib is not installed: `pip install matplotlib`)."""
    os.makedirs(out_dir, exist_ok=True)
    html_path = os.path.join(out_dir, f"{stem}.html")
    png_path = os.path.join(out_dir, f"{stem}.png")
    with open(html_path, "w", encoding="utf-8") as handle:
        handle.write(render_html_report(rollouts, title))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        warnings.warn("matplotlib is not installed: the credit report is written as HTML only.", stacklevel=2)
        return html_path, None
    render_png_report(rollouts, png_path, title)
    return html_path, png_path


__all__ = [
    "ROLLOUT_CHOICES",
    "choose_rollouts",
    "color_scale",
    "credit_table",
    "decode_tokens",
    "prompt_text",
    "render_html",
    "render_html_report",
    "render_png",
    "render_png_report",
    "rollout_summary",
    "trace_rows",
    "trainer_tokenizer",
    "weight_color",
    "write_report",
]
