"""Seeing the credit: the pure renderers on a hand-made trace, token decoding, and the CLI on the tiny recipe."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
import torch
from transformers import AutoTokenizer

from gear_trl.inspect_credit import main
from gear_trl.reporting import (
    decode_tokens,
    render_html,
    render_html_report,
    render_png,
    rollout_summary,
    trace_rows,
)
from gear_trl.reporting.rows import token_table
from gear_trl.trainer.gear_trainer import CreditTrace

TINY = "data/tiny-qwen3"

TOKENS = [
    "The",
    " pens",
    " cost",
    " 45",
    ".\n",
    "<tool_response>",
    "x",
    "</tool_response>",
    "So",
    " \\boxed{",
    "5",
    "}",
    "<b>&",
]
SEGMENTS = [-1, 0, 0, 0, -1, -1, -1, -1, 1, 1, -1, -1, -1]
MASK = [True] * 5 + [False] * 3 + [True] * 5
WEIGHTS = [1.1, 0.6, 0.6, 0.6, 1.2, 0.0, 0.0, 0.0, 0.75, 0.75, 1.3, 1.25, 1.05]


def hand_made_row():
    n = len(TOKENS)
    return {
        "kl": [0.001 * (i + 1) for i in range(n)],
        "entropy": [0.5 + 0.25 * (i % 4) for i in range(n)],
        "signal": [0.3] * n,
        "weights": WEIGHTS,
        "segment_ids": SEGMENTS,
        "mask": MASK,
        "advantage": 0.875,
        "reward": 1.0,
        "rewards": {"accuracy": 1.0, "format": 0.0},
        "prompt": "Yusuf buys 9 pens at $5 each.",
        "ground_truth": "5",
    }


class TokenSpans(HTMLParser):
    """Collects every `.tok` span: its classes, data attributes, tooltip and text."""

    def __init__(self):
        super().__init__()
        self.tokens, self._depth, self._in_text = [], 0, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "span" and "tok" in classes:
            self.tokens.append({"classes": set(classes), "attrs": attrs, "text": ""})
        elif tag == "span" and "t" in classes and self.tokens:
            self._in_text = True

    def handle_endtag(self, tag):
        if tag == "span":
            self._in_text = False

    def handle_data(self, data):
        if self._in_text:
            self.tokens[-1]["text"] += data


def test_render_html_shows_every_token_with_segments_values_and_masked_tokens():
    page = render_html(TOKENS, hand_made_row(), "hand-made <trace>")
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page  # self-contained
    assert "hand-made &lt;trace&gt;" in page
    parser = TokenSpans()
    parser.feed(page)
    spans = parser.tokens
    assert len(spans) == len(TOKENS)
    shown = [s["text"] for s in spans]
    assert shown[4] == ".\u21b5" and shown[-1] == "<b>&"  # newline made visible; markup escaped, then unescaped
    assert [t.replace("\n", "\u21b5") for t in TOKENS] == shown

    # Segments: bracket classes on every member, the onset on the first token, the closing mark on the last.
    for i, span in enumerate(spans):
        assert int(span["attrs"]["data-seg"]) == SEGMENTS[i]
        assert ("seg" in span["classes"]) == (SEGMENTS[i] >= 0)
    onsets = [i for i, s in enumerate(spans) if "onset" in s["classes"]]
    ends = [i for i, s in enumerate(spans) if "seg-last" in s["classes"]]
    assert onsets == [1, 8] and ends == [3, 9]
    assert "segment 0 (onset)" in spans[1]["attrs"]["title"] and "segment 0" in spans[2]["attrs"]["title"]

    # Exact values in tooltips and data attributes.
    for i, span in enumerate(spans):
        title = span["attrs"]["title"]
        assert f"weight {WEIGHTS[i]:.4f}" in title
        assert f"KL {0.001 * (i + 1):.6g}" in title
        assert float(span["attrs"]["data-weight"]) == WEIGHTS[i]
    assert "(1.000 of max)" in spans[-1]["attrs"]["title"]  # KL normalized by the rollout's maximum

    # Tool-result tokens are greyed and say why.
    masked = [i for i, s in enumerate(spans) if "masked" in s["classes"]]
    assert masked == [5, 6, 7]
    assert "tool result" in spans[6]["attrs"]["title"]

    # Header: reward, each reward, advantage, summary.
    for text in ("reward 1 (accuracy 1, format 0)", "advantage +0.875", "10 model tokens", "2 segments"):
        assert text in page


def test_rollout_summary_counts_model_tokens_only():
    summary = rollout_summary(hand_made_row())
    assert summary["model_tokens"] == 10 and summary["onsets"] == 2
    assert summary["weight_min"] == 0.6 and summary["weight_max"] == 1.3


def test_render_png_writes_an_image(tmp_path):
    from PIL import Image

    path = render_png(
        TOKENS * 30,
        {k: v * 30 if isinstance(v, list) else v for k, v in hand_made_row().items()},
        str(tmp_path / "credit.png"),
        "hand-made $x$ trace",
    )
    with open(path, "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        width, height = image.size
        assert width > 800 and height > 400
        assert len(set(image.convert("RGB").getdata())) > 20  # coloured, not blank


def test_decode_tokens_concatenate_to_the_decoded_text():
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    text = "Lena saves €7 — café\n\\boxed{5}<|im_end|>"
    ids = tokenizer(text)["input_ids"]
    pieces = decode_tokens(tokenizer, ids)
    assert len(pieces) == len(ids)
    assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=False)
    assert "\ufffd" not in "".join(pieces)


def test_trace_rows_cut_padding_and_recover_the_advantage():
    pad = 0
    mask = torch.tensor([[1, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
    weights = torch.tensor([[0.5, 1.5, 0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0]])
    base = torch.tensor([2.0, -1.0])
    trace = CreditTrace(
        completion_ids=torch.tensor([[5, 6, 7, 8, pad, pad], [5, 6, 7, 8, 9, 10]]),
        mask=mask,
        kl=torch.rand(2, 6),
        entropy=torch.rand(2, 6),
        signal=torch.rand(2, 6),
        segment_ids=torch.full((2, 6), -1),
        weights=weights,
        advantages=base[:, None] * weights,
        has_ground_truth=torch.tensor([True, True]),
        below_floor=torch.tensor([False, True]),
    )
    rows = trace_rows(trace, pad_token_id=pad)
    assert rows[0]["completion_ids"] == [5, 6, 7, 8] and rows[0]["mask"] == [True, True, False, True]
    assert [row["below_floor"] for row in rows] == [False, True]
    assert len(rows[1]["kl"]) == 6
    assert rows[0]["advantage"] == pytest.approx(2.0) and rows[1]["advantage"] == pytest.approx(-1.0)
    rows = trace_rows(trace, completion_mask=torch.tensor([[1, 1, 1, 1, 1, 0], [1] * 6]), rewards=torch.tensor([1, 0]))
    assert len(rows[0]["completion_ids"]) == 5 and rows[0]["reward"] == 1.0
    assert "loss_advantages" not in rows[0]  # the loss's advantages are A * weight: nothing more to show

    # with `distillation_weight` the loss's own advantages ride along, cut like the rest, into each token's tooltip
    trace.distilled = torch.arange(12, dtype=torch.float32).view(2, 6) / 4 - 1
    rows = trace_rows(trace, pad_token_id=pad)
    assert rows[0]["loss_advantages"] == [-1.0, -0.75, -0.5, -0.25] and len(rows[1]["loss_advantages"]) == 6
    tokens = ["a", "b", "c", "d"]
    assert [t["loss_advantage"] for t in token_table(tokens, rows[0])] == [-1.0, -0.75, -0.5, -0.25]
    parser = TokenSpans()
    parser.feed(render_html_report([(tokens, rows[0])], "distilled"))
    assert "advantage in the loss -0.7500 (with distillation_weight)" in parser.tokens[1]["attrs"]["title"]
    plain = {key: value for key, value in rows[0].items() if key != "loss_advantages"}
    assert all(t["loss_advantage"] is None for t in token_table(tokens, plain))


def test_cli_on_the_tiny_recipe_writes_html_and_png(tmp_path, capsys):
    out = tmp_path / "inspect"
    html_path, png_path = main(
        [
            "--config",
            "recipes/tiny/config_math.yaml",
            "--num_rollouts",
            "2",
            "--out",
            str(out),
            "--max_completion_length",
            "16",
        ]
    )
    assert html_path == str(out / "credit_test.html") and png_path == str(out / "credit_test.png")
    page = (out / "credit_test.html").read_text()
    parser = TokenSpans()
    parser.feed(page)
    assert page.count('<section class="rollout">') == 2
    assert 2 <= len(parser.tokens) <= 32
    assert "advantage" in page and "accuracy_reward" in page
    assert (out / "credit_test.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert str(out / "credit_test.html") in printed
    # the default choice looks for a prompt whose rollouts mix outcomes, and says where it found none
    assert page.count("prompt 0:") == 2
    if "no mix" in page:
        assert "No prompt sampled has rollouts with mixed outcomes" in printed


def test_a_single_jsonl_is_inspected_on_its_only_split(tmp_path, capsys):
    """`--split` left out picks a split the data has: a single .jsonl file holds only `train` (the default used to be
    `test`, which such a file cannot have)."""
    data = tmp_path / "rows.jsonl"
    rows = [
        {"prompt": [{"role": "user", "content": f"What is {i} + 2?"}], "ground_truth": str(i + 2)} for i in range(4)
    ]
    data.write_text("\n".join(json.dumps(row) for row in rows))
    out = tmp_path / "inspect"
    argv = ["--config", "recipes/tiny/config_math.yaml", "--dataset_name", str(data), "--dataset_format", "generic",
            "--num_rollouts", "1", "--first_n", "--out", str(out), "--max_completion_length", "8"]  # fmt: skip
    html_path, _ = main(argv)
    assert html_path == str(out / "credit_train.html")
    assert f"Inspecting split 'train' of {str(data)!r}" in capsys.readouterr().out


def test_the_report_names_the_reference_each_teacher_saw(tmp_path):
    """Under `teacher_reference: sibling` each rollout's report says whether its teacher was shown a successful
    sibling (and which) or nothing; under the ground-truth teacher, the ground truth."""
    out = tmp_path / "inspect"
    base = ["--config", "recipes/tiny/config_math.yaml", "--num_rollouts", "4", "--first_n",
            "--max_completion_length", "8", "--reward_funcs", "format"]  # fmt: skip
    main([*base, "--out", str(out), "--teacher_reference", "sibling", "--teacher_sibling_min_reward", "0.0"])
    page = (out / "credit_test.html").read_text()
    assert page.count("the teacher saw: successful sibling") == 4  # every format reward is >= 0: all succeed
    main([*base, "--out", str(out / "none"), "--teacher_reference", "sibling", "--teacher_sibling_min_reward", "9"])
    assert (out / "none" / "credit_test.html").read_text().count("the teacher saw: none (no sibling)") == 4
    main([*base, "--out", str(out / "answer")])
    assert page.count("the teacher saw:") == 4
    assert (out / "answer" / "credit_test.html").read_text().count("the teacher saw: ground truth") == 4
