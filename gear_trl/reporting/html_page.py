"""The credit report as one self-contained HTML page: the layout is the Jinja template `templates/credit.html.j2`,
this module computes what it shows (per token: colours, classes, tooltip; per rollout: the header)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache

import jinja2

from .colors import (
    ADVANTAGE_COLORS,
    ENTROPY_COLORS,
    KL_COLORS,
    MASKED_COLOR,
    ONSET_COLOR,
    WEIGHT_COLORS,
    WEIGHT_SPAN,
    advantage_color,
    advantage_scale,
    color_scale,
    weight_color,
)
from .rows import display_token, header_parts, token_table

TEMPLATE = "credit.html.j2"


@cache
def _template() -> jinja2.Template:
    # Autoescaping on: token text, prompts and titles are model output or user data, never markup.
    loader = jinja2.FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates"))
    env = jinja2.Environment(
        loader=loader,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template(TEMPLATE)


def _tooltip(tok: dict) -> str:
    lines = [f"#{tok['index']} {tok['text']!r}" + (f" (id {tok['id']})" if tok["id"] is not None else "")]
    if not tok["mask"]:
        lines.append("tool result / not trained (mask 0)")
    lines += [
        f"KL {tok['kl']:.6g} ({tok['kl_norm']:.3f} of max)",
        f"entropy {tok['entropy']:.6g} ({tok['entropy_norm']:.3f} of max)",
        f"signal {tok['signal']:.4f}",
        f"weight {tok['weight']:.4f}",
    ]
    if tok.get("loss_advantage") is not None:
        lines.append(f"advantage in the loss {tok['loss_advantage']:+.4f} (with distillation_weight)")
    if tok["segment"] >= 0:
        lines.append(f"segment {tok['segment']}" + (" (onset)" if tok["first"] else ""))
    elif tok["mask"]:
        lines.append("outside segments")
    return "\n".join(lines)


def _token_view(tok: dict, scale: float | None = None) -> dict:
    classes = ["tok"]
    if not tok["mask"]:
        classes.append("masked")
    if tok["segment"] >= 0:
        classes.append("seg")
        if tok["first"]:
            classes += ["seg-first", "onset"]
        if tok["last"]:
            classes.append("seg-last")
    style = (
        f"--kl:{color_scale(KL_COLORS, tok['kl_norm'])};--h:{color_scale(ENTROPY_COLORS, tok['entropy_norm'])};"
        f"--w:{weight_color(tok['weight'])}"
    )
    if scale is not None:  # the advantage in the loss, on the report's one scale
        style += f";--a:{advantage_color(tok.get('loss_advantage'), scale)}"
    return {
        "classes": " ".join(classes),
        "index": tok["index"],
        "segment": tok["segment"],
        "kl": repr(tok["kl"]),  # exact values in the data attributes
        "entropy": repr(tok["entropy"]),
        "weight": repr(tok["weight"]),
        "style": style,
        "title": _tooltip(tok),
        "text": display_token(tok["text"]),
        "newline": "\n" in tok["text"],
    }


def _rollout_view(table: list[dict], trace_row: dict, title: str, scale: float | None = None) -> dict:
    advantage = trace_row.get("advantage")
    meta = []
    for part in header_parts(trace_row):
        css = None
        if part.startswith("advantage") and advantage is not None and advantage != 0:
            css = "pos" if advantage > 0 else "neg"
        meta.append({"text": part, "css": css})
    prompt, truth = trace_row.get("prompt"), trace_row.get("ground_truth")
    kind, shown = trace_row.get("teacher_reference_kind"), trace_row.get("teacher_reference")
    return {
        "teacher_reference_kind": kind,
        "teacher_reference": None if kind is None else ("(nothing)" if shown is None else str(shown)),
        "title": title,
        "meta": meta,
        "prompt": None if prompt is None else str(prompt),
        "ground_truth": None if truth is None else str(truth),
        "tokens": [_token_view(tok, scale) for tok in table],
    }


def render_html_report(rollouts: Sequence[tuple[Sequence[str], dict]], title: str) -> str:
    """A self-contained HTML page (inline CSS, no scripts or external assets) of several `(tokens, trace_row)`. A
    fourth band, the advantage in the loss, is drawn when any token has one (`distillation_weight`)."""
    tables = [(row, token_table(tokens, row)) for tokens, row in rollouts]
    scale = advantage_scale([table for _, table in tables])
    return _template().render(
        title=title,
        rollouts=[_rollout_view(table, row, f"rollout {i}", scale) for i, (row, table) in enumerate(tables)],
        advantage_colors=",".join(ADVANTAGE_COLORS),
        advantage_scale=None if scale is None else f"{scale:.3g}",
        kl_colors=",".join(KL_COLORS),
        entropy_colors=",".join(ENTROPY_COLORS),
        weight_colors=",".join(WEIGHT_COLORS),
        weight_low=f"{1 - WEIGHT_SPAN:g}",
        weight_high=f"{1 + WEIGHT_SPAN:g}",
        masked_color=MASKED_COLOR,
        onset_color=ONSET_COLOR,
    )


def render_html(tokens: Sequence[str], trace_row: dict, title: str) -> str:
    """A self-contained HTML page of one rollout: see `render_html_report`."""
    return render_html_report([(tokens, trace_row)], title)
