"""The credit report's HTML, rendered from its Jinja template: tokens, colours and legend, and the template shipped."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gear_trl.reporting import render_html_report
from gear_trl.reporting.colors import ENTROPY_COLORS, KL_COLORS, WEIGHT_COLORS, color_scale, weight_color
from tests.reporting.test_inspect import TOKENS, TokenSpans, hand_made_row

REPO = Path(__file__).resolve().parents[2]


def styles(span) -> dict[str, str]:
    return dict(part.split(":", 1) for part in span["attrs"]["style"].split(";"))


def test_every_token_carries_its_kl_entropy_and_weight_colours():
    row = hand_made_row()
    page = render_html_report([(TOKENS, row)], "colours")
    parser = TokenSpans()
    parser.feed(page)
    assert [s["text"] for s in parser.tokens] == [t.replace("\n", "\u21b5") for t in TOKENS]
    model = [i for i, m in enumerate(row["mask"]) if m]
    kl_max = max(row["kl"][i] for i in model)
    h_max = max(row["entropy"][i] for i in model)
    for i, span in enumerate(parser.tokens):
        style = styles(span)
        assert style["--kl"] == color_scale(KL_COLORS, row["kl"][i] / kl_max)
        assert style["--h"] == color_scale(ENTROPY_COLORS, row["entropy"][i] / h_max)
        assert style["--w"] == weight_color(row["weights"][i])
    # The weight scale runs blue (less credit) - white (1) - orange (more): check its ends and middle.
    assert weight_color(1.0) == "#ffffff" and weight_color(0.5) == WEIGHT_COLORS[0] and weight_color(9) == "#e66101"
    assert styles(parser.tokens[1])["--w"] != "#ffffff"  # weight 0.6: a shade of blue
    for stops in (KL_COLORS, ENTROPY_COLORS, WEIGHT_COLORS):
        assert f"linear-gradient(to right,{','.join(stops)})" in page  # the legend's bars


def test_a_negative_advantage_is_marked_and_rollouts_get_their_own_sections():
    good, bad = hand_made_row(), {**hand_made_row(), "advantage": -0.25, "prompt": None, "ground_truth": None}
    page = render_html_report([(TOKENS, good), (TOKENS, bad)], "two")
    sections = page.split('<section class="rollout">')[1:]
    assert len(sections) == 2
    assert '<span class="pos">advantage +0.875</span>' in sections[0]
    assert '<span class="neg">advantage -0.250</span>' in sections[1]
    assert "<details>" in sections[0] and "<details>" not in sections[1]  # no prompt, no ground truth
    # Token spans follow one another with nothing between them (a space would show between the tokens).
    assert not re.search(r"</span>\s+<span class=\"tok", page)


def test_the_template_ships_in_the_wheel(tmp_path):
    # Built from a copy: an in-tree build would reuse a stale build/ folder that already holds the template.
    source = tmp_path / "source"
    shutil.copytree(REPO / "gear_trl", source / "gear_trl", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        check=True,
        cwd=source,
    )
    (wheel,) = tmp_path.glob("gear_trl-*.whl")
    assert "gear_trl/reporting/templates/credit.html.j2" in zipfile.ZipFile(wheel).namelist()


def test_a_completion_below_the_noise_floor_says_so_instead_of_counting_segments():
    quiet = {**hand_made_row(), "below_floor": True, "segment_ids": [-1] * len(TOKENS)}
    page = render_html_report([(TOKENS, hand_made_row()), (TOKENS, quiet)], "floor")
    loud_section, quiet_section = page.split('<section class="rollout">')[1:]
    meta = [section.split('<div class="meta">')[1].split("</div>")[0] for section in (loud_section, quiet_section)]
    assert "KL below the noise floor" in meta[1] and not re.search(r"\d+ segments?", meta[1])
    assert "KL below the noise floor" not in meta[0] and re.search(r"\d+ segments?", meta[0])


def _rows(advantages):
    return [{"advantage": a, "id": i} for i, a in enumerate(advantages)]


def test_choose_rollouts_pairs_the_best_and_worst_of_groups_with_mixed_outcomes():
    from gear_trl.reporting import choose_rollouts

    # prompt 0 (rows 0-3): all failed, advantage 0; prompt 1 (rows 4-7): 1 pass, 3 fails; prompt 2: 2 and 2
    rows = _rows([0, 0, 0, 0, -0.5, 1.5, -0.5, -0.5, 1, -1, 1, -1])
    keys = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    chosen = choose_rollouts(rows, 4, keys)
    assert [row["id"] for row in chosen] == [5, 4, 8, 9]
    assert chosen[0]["group"] == "prompt 1: 1 of 4 above the group's mean, 3 below"
    assert chosen[2]["group"] == "prompt 2: 2 of 4 above the group's mean, 2 below"
    # more than the pairs can fill: the first rows not chosen, said to have no mix
    chosen = choose_rollouts(rows, 6, keys)
    assert [row["id"] for row in chosen] == [5, 4, 8, 9, 0, 1]
    assert chosen[4]["group"] == "prompt 0: no mix, all 4 alike (advantage 0)"
    # an odd limit cuts the last pair to its passed rollout
    assert [row["id"] for row in choose_rollouts(rows, 3, keys)] == [5, 4, 8]
    # the first-N choice, labelled all the same
    chosen = choose_rollouts(rows, 3, keys, "first")
    assert [row["id"] for row in chosen] == [0, 1, 2] and "no mix" in chosen[0]["group"]
    assert "group" not in rows[0]  # copies


def test_choose_rollouts_without_a_mixed_group_says_so():
    from gear_trl.reporting import choose_rollouts

    chosen = choose_rollouts(_rows([0, 0, 0, 0]), 2, [0, 0, 1, 1])
    assert [row["id"] for row in chosen] == [0, 1]
    assert all("no mix" in row["group"] for row in chosen)
    # a shuffled batch holding only the failed part of a group: no mix here, not advantage 0
    (row,) = choose_rollouts(_rows([-0.7]), 1, ["x"])
    assert row["group"] == "prompt 0: no mix here, the 1 in this batch all below the group's mean"
    with pytest.raises(ValueError, match="choice"):
        choose_rollouts(_rows([0]), 1, [0], "best")
    with pytest.raises(ValueError, match="group keys"):
        choose_rollouts(_rows([0, 0]), 1, [0])


def test_the_group_note_heads_the_rollout():
    from gear_trl.reporting.rows import header_lines

    head, _ = header_lines({"group": "prompt 1: 1 of 4 above the group's mean, 3 below", "advantage": 1.5, "kl": []})
    assert head.startswith("prompt 1: 1 of 4") and "advantage +1.500" in head


def test_the_advantage_in_the_loss_gets_a_band_of_its_own_on_one_scale_for_the_report():
    """With `distillation_weight` a token's advantage in the loss has its own sign, which the weight band cannot show:
    a fourth band colours it red (pushed down) to green (pushed up), full colour at the report's largest |value|
    over trained tokens; a report without it keeps its three bands."""
    from gear_trl.reporting.colors import ADVANTAGE_COLORS, advantage_color, advantage_scale
    from gear_trl.reporting.rows import token_table

    row = hand_made_row()
    n = len(TOKENS)
    first = {**row, "loss_advantages": [0.5 - 0.25 * i for i in range(n)]}  # +0.5, +0.25, 0, -0.25, ...
    second = {**row, "loss_advantages": [0.1] * n}
    model = [i for i, m in enumerate(row["mask"]) if m]
    tables = [token_table(TOKENS, first), token_table(TOKENS, second)]
    assert advantage_scale(tables) == max(abs(0.5 - 0.25 * i) for i in model)  # masked tokens do not set it
    assert advantage_scale([token_table(TOKENS, row)]) is None
    scale = 2.0
    assert advantage_color(-2.0, scale) == ADVANTAGE_COLORS[0] and advantage_color(2.0, scale) == ADVANTAGE_COLORS[2]
    assert advantage_color(0.0, scale) == "#ffffff" and advantage_color(None, scale) == "#ffffff"
    page = render_html_report([(TOKENS, first), (TOKENS, second)], "distilled")
    parser = TokenSpans()
    parser.feed(page)
    scale = advantage_scale(tables)
    for i, span in enumerate(parser.tokens[:n]):
        assert styles(span)["--a"] == advantage_color(first["loss_advantages"][i], scale)
    assert page.count('<span class="b a"></span>') == 2 * n and 'id="view-a"' in page
    assert f"linear-gradient(to right,{','.join(ADVANTAGE_COLORS)})" in page
    plain = render_html_report([(TOKENS, row)], "plain")
    assert '<span class="b a">' not in plain and 'id="view-a"' not in plain and "--a:" not in plain
