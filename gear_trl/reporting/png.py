"""The credit report as a PNG (matplotlib): per rollout a header, then its tokens as boxes wrapped over lines, three
bands under each (KL, entropy, weight; a fourth, the advantage in the loss, where `distillation_weight` made it more
than A * weight), laid out in inches on one axes. matplotlib is imported when a figure is drawn,
so the HTML report works without it."""

from __future__ import annotations

import os
import textwrap
import warnings
from collections.abc import Sequence
from typing import Any

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
from .rows import display_token, header_lines, token_table

_FONT_SIZE = 9.0
_CHAR_W = 0.6 * _FONT_SIZE / 72  # DejaVu Sans Mono advance width, inches
_TEXT_H = 1.5 * _FONT_SIZE / 72
_BAND_H = 0.07
_BAND_LABEL_SIZE = 6.5
_LINE_GAP = 0.1
_TITLE_SIZE = 11.0
_TITLE_CHAR_W = 0.66 * _TITLE_SIZE / 72  # bold DejaVu Sans, a generous average advance width, inches
_PAD = 0.03
_LEFT = 0.42  # gutter for the band labels
_RIGHT = 0.3


def _layout(table: list[dict], chars_per_line: int) -> list[list[tuple[dict, float, float]]]:
    """Lines of (token, x, width) in inches from the left of the token area. Tokens flow to the page width; a newline
    inside a token is shown as its mark and does not start a line (a line per line break made reports of reasoning
    text several metres tall)."""
    width_max = chars_per_line * _CHAR_W
    lines, line, x = [], [], 0.0
    for tok in table:
        width = max(len(display_token(tok["text"])), 1) * _CHAR_W + _PAD
        if line and x + width > width_max:
            lines.append(line)
            line, x = [], 0.0
        line.append((tok, x, width))
        x += width
    if line:
        lines.append(line)
    return lines


def render_png_report(
    rollouts: Sequence[tuple[Sequence[str], dict]],
    path: str,
    title: str,
    *,
    chars_per_line: int = 110,
    max_tokens: int = 600,
    dpi: int = 150,
) -> str:
    """Draw several `(tokens, trace_row)` to a PNG at `path`: per rollout a header line, then its tokens as boxes
    wrapped over lines, each with three bands (KL, entropy, weight) and a fourth (the advantage in the loss, red to
    green on one scale for the report) when any token has a `loss_advantage`, onsets outlined in red, a bracket under each
    segment, tool-result tokens greyed. A rollout longer than `max_tokens` is cut (the HTML shows all). Returns
    `path`."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.patches import Rectangle

    tables = [(row, token_table(tokens, row)) for tokens, row in rollouts]
    scale = advantage_scale([table for _, table in tables])
    band_labels = ("KL", "H", "w") if scale is None else ("KL", "H", "w", "A")
    line_h = _TEXT_H + len(band_labels) * _BAND_H + _LINE_GAP
    blocks = []
    for row, table in tables:
        cut = max(len(table) - max_tokens, 0)
        blocks.append((row, _layout(table[:max_tokens], chars_per_line), cut))

    width = _LEFT + chars_per_line * _CHAR_W + _RIGHT
    # The title wraps to the page (model and data paths are long) rather than running off it.
    title_lines = textwrap.wrap(title, max(int((width - _LEFT - _RIGHT) / _TITLE_CHAR_W), 20)) or [""]
    header_h, legend_h = 0.45, 0.42
    title_h = 0.16 + 0.22 * len(title_lines)
    height = (
        title_h
        + legend_h
        + sum(header_h + len(lines) * line_h + (0.2 if cut else 0) + 0.15 for _, lines, cut in blocks)
    )
    fig = plt.figure(figsize=(width, height), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    text_kw = {"parse_math": False, "va": "center", "ha": "left"}

    rects, faces = [], []
    onset_boxes, bracket_segments = [], []

    def rect(x, y, w, h, face):
        rects.append(Rectangle((x, y), w, h))
        faces.append(face)

    ax.text(
        _LEFT, title_h / 2, "\n".join(title_lines), fontsize=_TITLE_SIZE, fontweight="bold", linespacing=1.3, **text_kw
    )
    y = title_h
    # Legend: a gradient strip a band and what the marks mean.
    x = _LEFT
    strips = [
        ("KL / max", KL_COLORS, "0", "1"),
        ("entropy / max", ENTROPY_COLORS, "0", "1"),
        ("weight", WEIGHT_COLORS, f"{1 - WEIGHT_SPAN:g}", f"{1 + WEIGHT_SPAN:g}"),
    ]
    bands_text = "bands under each token: KL, entropy, weight"
    marks_text = "red box: segment onset;  bracket: segment;  grey: tool result"
    if scale is not None:
        strips.append(("advantage in the loss (A)", ADVANTAGE_COLORS, f"{-scale:+.3g}", f"{scale:+.3g}"))
        bands_text = "bands: KL, entropy, weight, A"  # three short lines: four strips leave less room
        marks_text = "red box: segment onset\nbracket: segment;  grey: tool result"
    for label, stops, low, high in strips:
        ax.text(x, y + 0.1, label, fontsize=7, **text_kw)
        for k in range(24):
            rect(x + k * 0.05, y + 0.2, 0.05, 0.08, color_scale(stops, k / 23))
        ax.text(x, y + 0.36, low, fontsize=6, **text_kw)
        ax.text(x + 1.2, y + 0.36, high, fontsize=6, va="center", ha="right", parse_math=False)
        x += 1.6 if scale is None else 1.45
    ax.text(
        x,
        y + 0.18,
        bands_text + "\n" + marks_text,
        fontsize=7,
        color="#444",
        linespacing=1.4,
        **text_kw,
    )
    y += legend_h

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing")
        for index, (row, lines, cut) in enumerate(blocks):
            head, stats = header_lines(row)
            ax.text(
                _LEFT,
                y + 0.12,
                _short(f"rollout {index}:  {head}", chars_per_line),
                fontsize=9,
                fontweight="bold",
                **text_kw,
            )
            context = [stats]
            if row.get("prompt") is not None:
                context.append("prompt: " + _short(row["prompt"], 70))
            if row.get("ground_truth") is not None:
                context.append("ground truth: " + _short(row["ground_truth"], 30))
            if row.get("teacher_reference_kind") not in (None, "ground truth"):
                shown = row.get("teacher_reference")
                context.append(f"teacher saw ({row['teacher_reference_kind']}): " + _short(str(shown or ""), 30))
            ax.text(
                _LEFT,
                y + 0.3,
                _short("  \u00b7  ".join(context), int(chars_per_line * 1.2)),
                fontsize=7,
                color="#555",
                **text_kw,
            )
            y += header_h
            for number, line in enumerate(lines):
                band_y = y + _TEXT_H
                for k, label in enumerate(band_labels):  # on every line, so any band can be read where it is
                    ax.text(
                        _LEFT - 0.05,
                        band_y + (k + 0.5) * _BAND_H,
                        label,
                        fontsize=_BAND_LABEL_SIZE,
                        color="#444",
                        va="center",
                        ha="right",
                        parse_math=False,
                    )
                segment_start = None
                for tok, x0, w in line:
                    x0 += _LEFT
                    masked = not tok["mask"]
                    rect(x0, y, w, _TEXT_H, "#ffffff")
                    if masked:
                        bands = (MASKED_COLOR,) * len(band_labels)
                    else:
                        bands = (
                            color_scale(KL_COLORS, tok["kl_norm"]),
                            color_scale(ENTROPY_COLORS, tok["entropy_norm"]),
                            weight_color(tok["weight"]),
                        )
                        if scale is not None:
                            bands += (advantage_color(tok["loss_advantage"], scale),)
                    for k, face in enumerate(bands):
                        rect(x0, band_y + k * _BAND_H, w, _BAND_H, face)
                    ax.text(
                        x0 + _PAD / 2,
                        y + _TEXT_H / 2,
                        display_token(tok["text"]),
                        fontsize=_FONT_SIZE,
                        family="DejaVu Sans Mono",
                        color="#9a9a9a" if masked else "#111111",
                        fontstyle="italic" if masked else "normal",
                        **text_kw,
                    )
                    if tok["first"]:
                        onset_boxes.append(Rectangle((x0 + 0.005, y + 0.005), w - 0.01, _TEXT_H - 0.01))
                    if tok["segment"] >= 0:
                        if segment_start is None:
                            segment_start = (x0, tok["first"])
                        if tok["last"] or tok is line[-1][0]:
                            bracket_y = band_y + len(band_labels) * _BAND_H + 0.025
                            start_x, opens = segment_start
                            end_x = x0 + w
                            bracket_segments.append([(start_x + 0.01, bracket_y), (end_x - 0.01, bracket_y)])
                            if opens:
                                bracket_segments.append(
                                    [(start_x + 0.01, bracket_y), (start_x + 0.01, bracket_y - 0.05)]
                                )
                            if tok["last"]:
                                bracket_segments.append([(end_x - 0.01, bracket_y), (end_x - 0.01, bracket_y - 0.05)])
                            segment_start = None
                y += line_h
            if cut:
                ax.text(
                    _LEFT,
                    y + 0.08,
                    f"\u2026 {cut} more tokens (the HTML report shows all)",
                    fontsize=7,
                    color="#555",
                    **text_kw,
                )
                y += 0.2
            y += 0.15
        ax.add_collection(PatchCollection(rects, facecolors=faces, edgecolors="none", linewidths=0))
        ax.add_collection(PatchCollection(onset_boxes, facecolors="none", edgecolors=ONSET_COLOR, linewidths=1.2))
        ax.add_collection(LineCollection(bracket_segments, colors="#222222", linewidths=1.2))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=dpi, facecolor="white")
    plt.close(fig)
    return path


def render_png(tokens: Sequence[str], trace_row: dict, path: str, title: str, **kwargs) -> str:
    """One rollout as a PNG at `path`: see `render_png_report`."""
    return render_png_report([(tokens, trace_row)], path, title, **kwargs)


def _short(text: Any, limit: int) -> str:
    if text is None:
        return ""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
