"""The credit PNG stays legible at 100%: tokens flow to the page width (a line break in the text does not start a
line of the figure), the title wraps instead of running off the page, and every line of tokens has its band labels."""

from __future__ import annotations

from PIL import Image

from gear_trl.reporting import render_png_report
from gear_trl.reporting.png import _layout
from gear_trl.reporting.rows import token_table
from tests.reporting.test_inspect import hand_made_row

REASONING = ["Step", " one", ":", " 9", " *", " 5", " =", " 45", ".\n"]  # a line break every 9 tokens


def rollout(repeats: int):
    row = hand_made_row()
    n = len(REASONING) * repeats
    row = {k: (v * n)[:n] if isinstance(v, list) else v for k, v in row.items()}
    return REASONING * repeats, row


def test_line_breaks_in_the_text_do_not_start_lines_of_the_figure():
    tokens, row = rollout(20)  # 180 tokens, 20 line breaks, about 600 characters
    lines = _layout(token_table(tokens, row), chars_per_line=110)
    assert len(lines) <= 7  # ~600 characters at 110 per line; it was one line per line break (20)
    assert sum(len(line) for line in lines) == len(tokens)


def test_a_four_rollout_report_fits_a_page_width_and_a_reasonable_height(tmp_path):
    title = (
        "GEAR credit: /home/someone/checkpoints/qwen3-4b-gear-tool-use/checkpoint-1200 on /data/my_math.jsonl [test]"
    )
    path = render_png_report([rollout(20)] * 4, str(tmp_path / "credit.png"), title)
    with Image.open(path) as image:
        width, height = image.size
        pixels = image.convert("L").load()
        # The title wraps: nothing is drawn in the right margin (the last 20 px) of the title's band.
        right_margin = [pixels[x, y] for x in range(width - 20, width) for y in range(90)]
    assert width < 1400
    assert height < 2400, height  # one line per line break made this about 3 times as tall
    assert min(right_margin) > 200, "the title runs into the right edge"


def test_a_report_with_loss_advantages_draws_a_fourth_band_in_their_colours(tmp_path):
    from gear_trl.reporting.colors import ADVANTAGE_COLORS

    tokens, row = rollout(2)
    n = len(tokens)
    plain = render_png_report([(tokens, row)], str(tmp_path / "plain.png"), "plain", dpi=50)
    down = {**row, "loss_advantages": [-1.0] * n}  # every token pushed down: full red
    distilled = render_png_report([(tokens, down)], str(tmp_path / "distilled.png"), "distilled", dpi=50)

    def colours(path):
        with Image.open(path) as image:
            return image.size, {rgb: count for count, rgb in image.convert("RGB").getcolors(1 << 20)}

    (width, height), plain_colours = colours(plain)
    (width_d, height_d), distilled_colours = colours(distilled)
    red = tuple(int(ADVANTAGE_COLORS[0][i : i + 2], 16) for i in (1, 3, 5))
    assert width_d == width and height_d > height  # one more band on every line
    assert red not in plain_colours
    # Under every trained token, not only in the legend's strip (a few dozen pixels at this resolution).
    assert distilled_colours.get(red, 0) > 500, distilled_colours.get(red, 0)
