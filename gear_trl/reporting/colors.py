"""The colour scales of the credit report, shared by the HTML page and the PNG figure.

KL and entropy are shown divided by their maximum over the rollout's model tokens, the normalization GEAR's thresholds
apply to; weights on a fixed diverging scale around 1, so reports from different steps compare.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

KL_COLORS = ("#ffffff", "#fdae91", "#d62728")
ENTROPY_COLORS = ("#ffffff", "#c9b3e0", "#6a3d9a")
WEIGHT_COLORS = ("#2166ac", "#ffffff", "#e66101")
WEIGHT_SPAN = 0.5
"""Weights are coloured from 1 - WEIGHT_SPAN (full blue: less credit / blame) to 1 + WEIGHT_SPAN (full orange)."""
ADVANTAGE_COLORS = ("#b42318", "#ffffff", "#1a7f37")
"""The advantage a token gets in the loss (with `distillation_weight`), on a diverging scale around 0: red pushes the
token down, green up, full colour at the report's largest absolute value."""
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


def advantage_scale(tables: Sequence[Sequence[dict]]) -> float | None:
    """The largest |loss advantage| over the trained tokens of every rollout of a report, the span of its advantage
    colours (one scale for the report, so its rollouts compare); None when no token has a loss advantage (the loss's
    advantage is A * weight, which the header and the weight band already show)."""
    values = [
        abs(tok["loss_advantage"])
        for table in tables
        for tok in table
        if tok["mask"] and tok.get("loss_advantage") is not None and math.isfinite(tok["loss_advantage"])
    ]
    if not values:
        return None
    return max(max(values), 1e-8)


def advantage_color(value: float | None, scale: float) -> str:
    """The colour of a loss advantage on a scale of +-`scale` (white for a token without one)."""
    if value is None:
        return "#ffffff"
    return color_scale(ADVANTAGE_COLORS, 0.5 + value / (2 * scale))
