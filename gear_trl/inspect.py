"""Seeing the credit: a few rollouts, every token coloured by GEAR's reverse KL, entropy and final weight.

    python -m gear_trl.inspect --config recipes/tiny/config_math.yaml --num-rollouts 4 --out outputs/inspect
    python -m gear_trl.inspect --config RECIPE.yaml --model outputs/run --split test --max_completion_length 512

The trainer is built from the recipe exactly as `gear_trl.train` builds it (any recipe field can be overridden on the
command line), rollouts are sampled on `--split` with the policy in train mode, and `GEARTrainer.compute_credit`
gives each token's KL, entropy, segment and weight. Written to `--out`: `credit_<split>.html` (self-contained; hover
a token for its exact values; switch the colouring between weight, KL and entropy) and `credit_<split>.png`.

The rendering functions (`render_html`, `render_png` and their `*_report` forms for several rollouts) are pure: they
take decoded token strings and a per-token `trace_row` (see `trace_rows`), so they work without a model; the
training callback (`gear_trl.callbacks.CreditReportCallback`) uses them too.

A `trace_row` is a dict with one entry per completion token for `kl`, `entropy`, `signal`, `weights`, `segment_ids`
(-1 outside segments) and `mask` (False: a tool result, not trained), and optionally `advantage`, `reward`, `rewards`
({reward name: value}), `prompt`, `ground_truth`, `completion_ids`.
"""

from __future__ import annotations

import argparse
import html
import math
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

# ---------------------------------------------------------------------------------------------------------------------
# Colours. KL and entropy are shown divided by their maximum over the rollout's model tokens, the normalization GEAR's
# thresholds apply to; weights on a fixed diverging scale around 1, so reports from different steps compare.
# ---------------------------------------------------------------------------------------------------------------------

KL_COLORS = ("#ffffff", "#fdae91", "#d62728")
ENTROPY_COLORS = ("#ffffff", "#c9b3e0", "#6a3d9a")
WEIGHT_COLORS = ("#2166ac", "#ffffff", "#e66101")
WEIGHT_SPAN = 0.5
"""Weights are coloured from 1 - WEIGHT_SPAN (full blue: less credit / blame) to 1 + WEIGHT_SPAN (full orange)."""
MASKED_COLOR = "#ececec"
ONSET_COLOR = "#d62728"


def _hex_to_rgb(color: str) -> tuple[float, float, float]:
    color = color.lstrip("#")
    return tuple(int(color[i : i + 2], 16) / 255 for i in (0, 2, 4))


def _rgb_to_hex(rgb: Sequence[float]) -> str:
    return "#" + "".join(f"{round(min(max(c, 0.0), 1.0) * 255):02x}" for c in rgb)


def color_scale(stops: Sequence[str], x: float) -> str:
    """The colour at `x` in [0, 1] (clamped) of a piecewise-linear scale through equally spaced `stops`."""
    if not math.isfinite(x):
        x = 0.0
    x = min(max(x, 0.0), 1.0) * (len(stops) - 1)
    low = min(int(x), len(stops) - 2)
    frac = x - low
    a, b = _hex_to_rgb(stops[low]), _hex_to_rgb(stops[low + 1])
    return _rgb_to_hex([ca + (cb - ca) * frac for ca, cb in zip(a, b, strict=True)])


def weight_color(weight: float) -> str:
    return color_scale(WEIGHT_COLORS, 0.5 + (weight - 1.0) / (2 * WEIGHT_SPAN))


# ---------------------------------------------------------------------------------------------------------------------
# One rollout's numbers
# ---------------------------------------------------------------------------------------------------------------------


def _floats(values) -> list[float]:
    values = values.tolist() if hasattr(values, "tolist") else values
    return [float(v) for v in values]


def _column(trace_row: dict, key: str, n: int, default) -> list:
    values = trace_row.get(key)
    if values is None:
        return [default] * n
    values = values.tolist() if hasattr(values, "tolist") else list(values)
    if len(values) != n:
        raise ValueError(f"trace_row[{key!r}] has {len(values)} values for {n} tokens.")
    return values


def _token_table(tokens: Sequence[str], trace_row: dict) -> list[dict]:
    """Per token: text, mask, raw and max-normalized KL and entropy, signal, weight, segment, onset/first/last flags."""
    n = len(tokens)
    mask = [bool(m) for m in _column(trace_row, "mask", n, True)]
    kl = [float(v) for v in _column(trace_row, "kl", n, 0.0)]
    entropy = [float(v) for v in _column(trace_row, "entropy", n, 0.0)]
    signal = [float(v) for v in _column(trace_row, "signal", n, 0.0)]
    weights = [float(v) for v in _column(trace_row, "weights", n, 1.0)]
    segments = [int(v) for v in _column(trace_row, "segment_ids", n, -1)]
    ids = _column(trace_row, "completion_ids", n, None)
    kl_max = max([v for v, m in zip(kl, mask, strict=True) if m] or [0.0])
    h_max = max([v for v, m in zip(entropy, mask, strict=True) if m] or [0.0])
    table = []
    for i in range(n):
        seg = segments[i] if mask[i] else -1
        previous = segments[i - 1] if i > 0 and mask[i - 1] else -1
        following = segments[i + 1] if i + 1 < n and mask[i + 1] else -1
        table.append(
            {
                "index": i,
                "text": tokens[i],
                "id": ids[i],
                "mask": mask[i],
                "kl": kl[i],
                "kl_norm": kl[i] / kl_max if kl_max > 0 else 0.0,
                "entropy": entropy[i],
                "entropy_norm": entropy[i] / h_max if h_max > 0 else 0.0,
                "signal": signal[i],
                "weight": weights[i],
                "segment": seg,
                "first": seg >= 0 and previous != seg,  # the segment's onset token
                "last": seg >= 0 and following != seg,
            }
        )
    return table


def rollout_summary(trace_row: dict) -> dict:
    """Mean KL over model tokens, number of segments (onsets), weight range, model-token count."""
    kl = _floats(trace_row.get("kl", []))
    n = len(kl)
    mask = [bool(m) for m in _column(trace_row, "mask", n, True)]
    weights = _floats(_column(trace_row, "weights", n, 1.0))
    segments = [int(s) for s in _column(trace_row, "segment_ids", n, -1)]
    kept_kl = [v for v, m in zip(kl, mask, strict=False) if m]
    kept_w = [v for v, m in zip(weights, mask, strict=False) if m]
    onsets = len({s for s, m in zip(segments, mask, strict=False) if m and s >= 0})
    return {
        "model_tokens": len(kept_kl),
        "mean_kl": sum(kept_kl) / len(kept_kl) if kept_kl else 0.0,
        "max_kl": max(kept_kl, default=0.0),
        "onsets": onsets,
        "weight_min": min(kept_w, default=1.0),
        "weight_max": max(kept_w, default=1.0),
    }


def display_token(text: str) -> str:
    """A token as shown: newlines, tabs and other control characters made visible."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\u21b5")
        elif ch == "\t":
            out.append("\u21e5")
        elif ch == "\r":
            out.append("\u240d")
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


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
    if tok["segment"] >= 0:
        lines.append(f"segment {tok['segment']}" + (" (onset)" if tok["first"] else ""))
    elif tok["mask"]:
        lines.append("outside segments")
    return "\n".join(lines)


def _header_parts(trace_row: dict) -> list[str]:
    summary = rollout_summary(trace_row)
    parts = []
    reward = trace_row.get("reward")
    if reward is not None:
        detail = trace_row.get("rewards") or {}
        inner = ", ".join(f"{name} {value:.3g}" for name, value in detail.items() if value is not None)
        parts.append(f"reward {reward:.3g}" + (f" ({inner})" if inner and len(detail) > 1 else ""))
    advantage = trace_row.get("advantage")
    if advantage is not None:
        parts.append(f"advantage {advantage:+.3f}")
    if trace_row.get("has_ground_truth") is False:
        parts.append("no ground truth: plain GRPO weights")
    parts.append(f"{summary['model_tokens']} model tokens")
    parts.append(f"{summary['onsets']} segment{'s' if summary['onsets'] != 1 else ''}")
    parts.append(f"mean KL {summary['mean_kl']:.4g}")
    parts.append(f"weight {summary['weight_min']:.3f}\u2013{summary['weight_max']:.3f}")
    return parts


def _header_lines(trace_row: dict) -> tuple[str, str]:
    """(reward and advantage, token statistics) for a two-line header."""
    parts = _header_parts(trace_row)
    head = [p for p in parts if p.startswith(("reward", "advantage"))]
    return "  \u00b7  ".join(head) or "(no reward recorded)", "  \u00b7  ".join(p for p in parts if p not in head)


def _short(text: Any, limit: int) -> str:
    if text is None:
        return ""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


# ---------------------------------------------------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 8px}
h2{font-size:15px;margin:0 0 4px}
.legend{font-size:12px;color:#444;margin:8px 0 4px;display:flex;flex-wrap:wrap;gap:18px;align-items:center}
.legend .bar{display:inline-block;width:90px;height:10px;vertical-align:middle;border:1px solid #ccc;margin:0 4px}
.views{font-size:13px;margin:6px 0 10px}
label{font-size:13px;margin-right:12px;cursor:pointer}
.rollout{border-top:1px solid #ddd;padding-top:10px;margin:14px 0 26px}
.meta{font-size:13px;color:#333;margin:2px 0 4px}
.meta .pos{color:#1a7f37}.meta .neg{color:#b42318}
details{font-size:12px;color:#555;margin:0 0 8px}
details pre{white-space:pre-wrap;margin:4px 0}
.tokens{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;line-height:1}
.tok{display:inline-flex;flex-direction:column;vertical-align:top;margin:0 0 8px;padding-bottom:2px;
  border-bottom:3px solid transparent;cursor:default}
.tok .t{white-space:pre;padding:2px 1px;min-width:5px;min-height:15px}
.tok .b{height:4px}
.tok .b.kl{background:var(--kl)}.tok .b.h{background:var(--h)}.tok .b.w{background:var(--w)}
.tok.masked .t{color:#9a9a9a;font-style:italic}.tok.masked .b{background:#ececec}
.tok.seg{border-bottom-color:#222}
.tok.seg-first{border-left:2px solid #222;margin-left:2px}
.tok.seg-last{border-right:2px solid #222;margin-right:2px}
.tok.onset .t{outline:2px solid #d62728;outline-offset:-2px;font-weight:bold}
.tok:hover .t{outline:1px dashed #555}
#view-w:checked~main .tok:not(.masked) .t{background:var(--w)}
#view-kl:checked~main .tok:not(.masked) .t{background:var(--kl)}
#view-h:checked~main .tok:not(.masked) .t{background:var(--h)}
"""


def _legend_html() -> str:
    def bar(stops):
        return f'<span class="bar" style="background:linear-gradient(to right,{",".join(stops)})"></span>'

    return (
        '<div class="legend">'
        f"<span>bands under each token, top to bottom: <b>KL</b> 0{bar(KL_COLORS)}max</span>"
        f"<span><b>entropy</b> 0{bar(ENTROPY_COLORS)}max</span>"
        f"<span><b>weight</b> {1 - WEIGHT_SPAN:g}{bar(WEIGHT_COLORS)}{1 + WEIGHT_SPAN:g}</span>"
        '<span><span style="outline:2px solid #d62728;padding:0 3px">onset</span> opens a segment; '
        "a bracket spans each segment; <i style='color:#9a9a9a'>grey</i>: tool result (not trained). "
        "KL and entropy are divided by their maximum over the rollout; hover a token for exact values.</span>"
        "</div>"
    )


def rollout_html(tokens: Sequence[str], trace_row: dict, title: str) -> str:
    """One rollout as an HTML fragment: a header (reward, advantage, summary) and its coloured tokens."""
    parts = _header_parts(trace_row)
    advantage = trace_row.get("advantage")
    meta = []
    for part in parts:
        css = ""
        if part.startswith("advantage") and advantage is not None:
            css = ' class="pos"' if advantage > 0 else ' class="neg"' if advantage < 0 else ""
        meta.append(f"<span{css}>{html.escape(part)}</span>")
    out = [
        f'<section class="rollout"><h2>{html.escape(title)}</h2>',
        f'<div class="meta">{" &middot; ".join(meta)}</div>',
    ]
    context = []
    if trace_row.get("prompt") is not None:
        context.append(f"<b>prompt</b><pre>{html.escape(str(trace_row['prompt']))}</pre>")
    if trace_row.get("ground_truth") is not None:
        context.append(f"<b>ground truth</b><pre>{html.escape(str(trace_row['ground_truth']))}</pre>")
    if context:
        out.append(f"<details><summary>prompt and ground truth</summary>{''.join(context)}</details>")
    out.append('<div class="tokens">')
    for tok in _token_table(tokens, trace_row):
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
        attrs = (
            f'class="{" ".join(classes)}" data-i="{tok["index"]}" data-seg="{tok["segment"]}" '
            f'data-kl="{tok["kl"]!r}" data-entropy="{tok["entropy"]!r}" data-weight="{tok["weight"]!r}" '
            f'style="{style}" title="{html.escape(_tooltip(tok), quote=True)}"'
        )
        out.append(
            f'<span {attrs}><span class="t">{html.escape(display_token(tok["text"]))}</span>'
            '<span class="b kl"></span><span class="b h"></span><span class="b w"></span></span>'
        )
        if "\n" in tok["text"]:
            out.append("<br>")
    out.append("</div></section>")
    return "".join(out)


def render_html_report(rollouts: Sequence[tuple[Sequence[str], dict]], title: str) -> str:
    """A self-contained HTML page (inline CSS, no scripts or external assets) of several `(tokens, trace_row)`."""
    sections = [rollout_html(tokens, row, f"rollout {i}") for i, (tokens, row) in enumerate(rollouts)]
    # The view switch is CSS only (no script): the radio inputs must be siblings of <main>.
    views = "".join(
        f'<input type="radio" name="view" id="view-{key}"{" checked" if key == "w" else ""}>'
        f'<label for="view-{key}">{label}</label>'
        for key, label in (("w", "weight"), ("kl", "reverse KL"), ("h", "entropy"), ("none", "none"))
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>{_legend_html()}"
        f'<span class="views">colour the tokens by: </span>{views}'
        f"<main>{''.join(sections)}</main></body></html>\n"
    )


def render_html(tokens: Sequence[str], trace_row: dict, title: str) -> str:
    """A self-contained HTML page of one rollout: see `render_html_report`."""
    return render_html_report([(tokens, trace_row)], title)


# ---------------------------------------------------------------------------------------------------------------------
# PNG (matplotlib): token boxes wrapped over lines, three bands under each, in inches on one axes.
# ---------------------------------------------------------------------------------------------------------------------

_FONT_SIZE = 9.0
_CHAR_W = 0.6 * _FONT_SIZE / 72  # DejaVu Sans Mono advance width, inches
_TEXT_H = 1.5 * _FONT_SIZE / 72
_BAND_H = 0.05
_LINE_GAP = 0.09
_PAD = 0.03
_LEFT = 0.42  # gutter for the band labels
_RIGHT = 0.2


def _layout(table: list[dict], chars_per_line: int) -> list[list[tuple[dict, float, float]]]:
    """Lines of (token, x, width) in inches from the left of the token area."""
    width_max = chars_per_line * _CHAR_W
    lines, line, x = [], [], 0.0
    for tok in table:
        width = max(len(display_token(tok["text"])), 1) * _CHAR_W + _PAD
        if line and x + width > width_max:
            lines.append(line)
            line, x = [], 0.0
        line.append((tok, x, width))
        x += width
        if "\n" in tok["text"]:
            lines.append(line)
            line, x = [], 0.0
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
    wrapped over lines, each with three bands (KL, entropy, weight), onsets outlined in red, a bracket under each
    segment, tool-result tokens greyed. A rollout longer than `max_tokens` is cut (the HTML shows all). Returns
    `path`."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.patches import Rectangle

    line_h = _TEXT_H + 3 * _BAND_H + _LINE_GAP
    blocks = []
    for tokens, row in rollouts:
        table = _token_table(tokens, row)
        cut = max(len(table) - max_tokens, 0)
        blocks.append((row, _layout(table[:max_tokens], chars_per_line), cut))

    header_h, legend_h, title_h = 0.45, 0.42, 0.38
    width = _LEFT + chars_per_line * _CHAR_W + _RIGHT
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

    ax.text(_LEFT, title_h / 2, title, fontsize=11, fontweight="bold", **text_kw)
    y = title_h
    # Legend: three gradient strips and what the marks mean.
    x = _LEFT
    for label, stops, low, high in (
        ("KL / max", KL_COLORS, "0", "1"),
        ("entropy / max", ENTROPY_COLORS, "0", "1"),
        ("weight", WEIGHT_COLORS, f"{1 - WEIGHT_SPAN:g}", f"{1 + WEIGHT_SPAN:g}"),
    ):
        ax.text(x, y + 0.1, label, fontsize=7, **text_kw)
        for k in range(24):
            rect(x + k * 0.05, y + 0.2, 0.05, 0.08, color_scale(stops, k / 23))
        ax.text(x, y + 0.36, low, fontsize=6, **text_kw)
        ax.text(x + 1.2, y + 0.36, high, fontsize=6, va="center", ha="right", parse_math=False)
        x += 1.6
    ax.text(
        x,
        y + 0.18,
        "bands under each token: KL, entropy, weight\nred box: segment onset;  bracket: segment;  grey: tool result",
        fontsize=7,
        color="#444",
        linespacing=1.4,
        **text_kw,
    )
    y += legend_h

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing")
        for index, (row, lines, cut) in enumerate(blocks):
            head, stats = _header_lines(row)
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
                if number == 0:
                    for k, label in enumerate(("KL", "H", "w")):
                        ax.text(
                            _LEFT - 0.05,
                            band_y + (k + 0.5) * _BAND_H,
                            label,
                            fontsize=5.5,
                            color="#666",
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
                        bands = (MASKED_COLOR,) * 3
                    else:
                        bands = (
                            color_scale(KL_COLORS, tok["kl_norm"]),
                            color_scale(ENTROPY_COLORS, tok["entropy_norm"]),
                            weight_color(tok["weight"]),
                        )
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
                            bracket_y = band_y + 3 * _BAND_H + 0.025
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


# ---------------------------------------------------------------------------------------------------------------------
# From a CreditTrace to rendered rollouts
# ---------------------------------------------------------------------------------------------------------------------


def decode_tokens(tokenizer, ids: Sequence[int]) -> list[str]:
    """Each token's text, in order, such that their concatenation is the decoded completion.

    Tokens are decoded in context (the previous piece included), so leading spaces survive tokenizers that drop them
    when a token is decoded alone; the bytes of a character split over several tokens go to the token that completes
    it (the others show as empty).
    """
    ids = [int(i) for i in ids]

    def decode(part):
        return tokenizer.decode(part, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    pieces, prefix, read = [], 0, 0
    for t in range(len(ids)):
        prefix_text = decode(ids[prefix:read])
        text = decode(ids[prefix : t + 1])
        if (len(text) > len(prefix_text) and not text.endswith("\ufffd")) or t + 1 - read >= 4:
            pieces.append(text[len(prefix_text) :] if text.startswith(prefix_text) else decode(ids[read : t + 1]))
            prefix, read = read, t + 1
        else:
            pieces.append("")
    if read < len(ids):  # an incomplete character at the very end
        pieces[-1] = decode(ids[read:])
    return pieces


def trace_rows(
    trace,
    *,
    pad_token_id: int | None = None,
    completion_mask=None,
    rewards=None,
    reward_details: list[dict] | None = None,
    base_advantages=None,
    prompts: Sequence[Any] | None = None,
    ground_truths: Sequence[Any] | None = None,
) -> list[dict]:
    """The rollouts of a `CreditTrace` as per-token lists (`trace_row` dicts), padding removed.

    Padding is cut using `completion_mask` (or the trace's own `completion_mask` field when it has one); without it,
    trailing tokens that are masked out and equal `pad_token_id`. `rewards` [B] and `base_advantages` [B] (or [B, T]:
    shown as their mean over model tokens) label the header; without them the trace's `rewards` / `base_advantages`
    fields are used when present, and the advantage is recovered from the per-token advantages as
    sum(A_i w_t) / sum(w_t).
    """
    completion_mask = completion_mask if completion_mask is not None else getattr(trace, "completion_mask", None)
    rewards = rewards if rewards is not None else getattr(trace, "rewards", None)
    base_advantages = base_advantages if base_advantages is not None else getattr(trace, "base_advantages", None)
    rows = []
    for i in range(trace.completion_ids.size(0)):
        ids = trace.completion_ids[i].tolist()
        mask = trace.mask[i].bool().tolist()
        if completion_mask is not None:
            kept = [j for j, m in enumerate(completion_mask[i].tolist()) if m]
            length = kept[-1] + 1 if kept else 0
        else:
            length = len(ids)
            while length and not mask[length - 1] and pad_token_id is not None and ids[length - 1] == pad_token_id:
                length -= 1
        weights = trace.weights[i].float()
        m = trace.mask[i].float()
        if base_advantages is not None:
            base = base_advantages[i]
            advantage = float((base * m).sum() / m.sum().clamp(min=1)) if base.dim() else float(base)
        else:
            total = (weights * m).sum()
            advantage = float((trace.advantages[i].float() * m).sum() / total) if total > 0 else 0.0
        row = {
            "completion_ids": ids[:length],
            "mask": mask[:length],
            "kl": trace.kl[i, :length].tolist(),
            "entropy": trace.entropy[i, :length].tolist(),
            "signal": trace.signal[i, :length].tolist(),
            "weights": trace.weights[i, :length].tolist(),
            "segment_ids": trace.segment_ids[i, :length].tolist(),
            "advantage": advantage,
            "has_ground_truth": bool(trace.has_ground_truth[i]),
        }
        if rewards is not None:
            value = float(rewards[i])
            row["reward"] = value if math.isfinite(value) else None
        if reward_details is not None:
            row["rewards"] = reward_details[i]
        if prompts is not None:
            row["prompt"] = prompts[i]
        if ground_truths is not None:
            row["ground_truth"] = ground_truths[i]
        rows.append(row)
    return rows


def prompt_text(prompt: Any) -> str:
    """The last user message of a conversational prompt (or the prompt itself)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, (list, tuple)):
        for message in reversed(prompt):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else str(content)
    return str(prompt)


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


def credit_table(rollouts: Sequence[tuple[Sequence[str], dict]], step: int | None = None, text_limit: int = 300):
    """Rows of (step, rollout, text, mean KL, onsets, weight range, reward, advantage) for experiment trackers."""
    columns = ["step", "rollout", "text", "mean_kl", "onsets", "weight_min", "weight_max", "reward", "advantage"]
    data = []
    for index, (tokens, row) in enumerate(rollouts):
        summary = rollout_summary(row)
        text = "".join(tokens)
        data.append(
            [
                step,
                index,
                text if len(text) <= text_limit else text[: text_limit - 1] + "\u2026",
                round(summary["mean_kl"], 6),
                summary["onsets"],
                round(summary["weight_min"], 4),
                round(summary["weight_max"], 4),
                row.get("reward"),
                None if row.get("advantage") is None else round(row["advantage"], 4),
            ]
        )
    return columns, data


# ---------------------------------------------------------------------------------------------------------------------
# The CLI: build the trainer as gear_trl.train does, sample, compute the credit, render.
# ---------------------------------------------------------------------------------------------------------------------


def trainer_tokenizer(trainer):
    """The trainer's tokenizer (a processor's own tokenizer for vision-language models), or None."""
    tokenizer = getattr(trainer, "_tokenizer", None) or getattr(trainer, "processing_class", None)
    return getattr(tokenizer, "tokenizer", tokenizer)


def sample_credit(trainer, dataset, num_rollouts: int) -> list[tuple[list[str], dict]]:
    """Sample rollouts for the first prompts of `dataset` (each `num_generations` times, as in training, so the
    advantages are GRPO's), compute their credit, and return the first `num_rollouts` as `(tokens, trace_row)`."""
    import torch

    if not trainer.args.uses_teacher:
        raise ValueError(
            f"`credit: {trainer.args.credit}` runs no teacher, so there is no per-token credit to show; inspect a "
            "GEAR mode (e.g. --credit gear)."
        )
    if len(dataset) == 0:
        raise ValueError("The split is empty.")
    generations = trainer.num_generations
    num_prompts = min(math.ceil(num_rollouts / generations), len(dataset))
    per_call = max(1, trainer.args.generation_batch_size // generations)
    # compute_credit needs the teacher states in the batch; GRPO's own no-grad student pass (num_iterations > 1,
    # vLLM importance sampling) would consume them during generation, so inspection always defers to compute_credit.
    trainer._grpo_runs_student_pass = lambda: False
    tokenizer = trainer_tokenizer(trainer)
    column = trainer.args.ground_truth_column
    trainer.model.train()  # sample as training does
    rendered = []
    for start in range(0, num_prompts, per_call):
        rows = [dict(dataset[j]) for j in range(start, min(start + per_call, num_prompts)) for _ in range(generations)]
        batch = trainer._generate_and_score_completions(rows)
        trace = trainer.compute_credit(batch).to("cpu")
        record = trainer._rollout
        first = trainer.accelerator.process_index * len(rows)  # the record holds every rank's rewards
        rewards_per_func = record.rewards_per_func[first : first + len(rows)].cpu()
        weights = trainer.reward_weights.cpu()
        rewards = torch.nan_to_num((rewards_per_func * weights[None]).nansum(dim=1), nan=0.0)
        names = list(trainer.reward_func_names)
        details = [
            {name: (None if math.isnan(v) else v) for name, v in zip(names, r, strict=True)}
            for r in rewards_per_func.tolist()
        ]
        rows_out = trace_rows(
            trace,
            completion_mask=batch["completion_mask"].cpu(),
            rewards=rewards,
            reward_details=details,
            base_advantages=batch["gear_base_advantages"].cpu(),
            prompts=[prompt_text(p) for p in record.prompts],
            ground_truths=[row.get(column) for row in rows],
        )
        for row in rows_out:
            rendered.append((decode_tokens(tokenizer, row["completion_ids"]), row))
    return rendered[:num_rollouts]


def parse_cli(argv: list[str] | None = None):
    """(inspection options, (script_args, training_args, model_args)) from the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m gear_trl.inspect",
        description="Render a few rollouts with every token coloured by GEAR's reverse KL, entropy and weight.",
        epilog="Every other option is a recipe field, as for gear_trl.train (--config RECIPE.yaml "
        "--max_completion_length 256 ...).",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--model",
        default=None,
        help="A model directory or a LoRA adapter directory to inspect "
        "instead of the recipe's model (e.g. a training run's output_dir).",
    )
    parser.add_argument("--split", default="test", help="Dataset split to draw prompts from (default: test).")
    parser.add_argument("--num-rollouts", "--num_rollouts", type=int, default=4, help="Rollouts to render.")
    parser.add_argument("--out", default=os.path.join("outputs", "inspect"), help="Output folder.")
    options, rest = parser.parse_known_args(argv)
    if options.num_rollouts < 1:
        parser.error("--num-rollouts must be at least 1")
    from .train import parse_args

    # Inspection trains nothing, reports nothing and pushes nothing; whatever the Trainer writes goes to --out.
    recipe = parse_args([*rest, "--report_to", "none", "--push_to_hub", "false", "--output_dir", options.out])
    return options, recipe


def main(argv: list[str] | None = None) -> tuple[str, str]:
    options, (script_args, training_args, model_args) = parse_cli(argv)
    from .evaluate import is_adapter_dir, load_model
    from .train import build_trainer, load_splits

    # load_splits prepares its train split: point it at the split to inspect.
    split_args = replace(script_args, dataset_train_split=options.split, max_train_samples=None)
    dataset, eval_dataset = load_splits(split_args, training_args)

    model, tokenizer = None, None
    if options.model is not None:
        if is_adapter_dir(options.model):
            model, tokenizer = load_model(
                options.model, dtype=model_args.dtype or "auto", merge=False, is_trainable=True
            )
        else:
            model_args.model_name_or_path = options.model
    trainer = build_trainer(
        script_args, training_args, model_args, dataset, eval_dataset, model=model, processing_class=tokenizer
    )
    rollouts = sample_credit(trainer, dataset, options.num_rollouts)
    name = options.model or model_args.model_name_or_path
    title = f"GEAR credit: {name} on {script_args.dataset_name} [{options.split}], credit={training_args.credit}"
    html_path, png_path = write_report(rollouts, options.out, f"credit_{options.split}", title)
    print(f"Wrote {len(rollouts)} rollouts to {html_path}" + (f" and {png_path}" if png_path else ""))
    return html_path, png_path


def cli(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    main(argv)


if __name__ == "__main__":
    cli(sys.argv[1:])
