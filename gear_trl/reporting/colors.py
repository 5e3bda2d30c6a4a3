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
