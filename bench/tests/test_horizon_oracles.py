"""bench/harness/oracles.py: the horizon study's oracle weightings and process signal on hand-worked rollouts, and
the same computations through the credit modes they register (`gear_trl.credit.modes`)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from bench.harness import oracles

REPO_ROOT = Path(__file__).resolve().parents[2]

# Three rollouts of 5 positions, the last of row 2 padding. Row 0 failed, its first wrong token at index 3; row 1
# passed; row 2 failed with its error not located.
MASK = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0]], dtype=torch.bool)
AFTER = torch.tensor([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=torch.bool)
FAILED = torch.tensor([True, False, True])


def test_prefix_weights_by_hand():
    w = oracles.prefix_weights(AFTER, MASK, FAILED)
    # row 0: 0 before the error, 5 tokens / 2 blamed = 2.5 from it on (mean 1); rows 1 and 2 unchanged
    assert w.tolist() == [[0, 0, 0, 2.5, 2.5], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]


def test_raw_prefix_weights_drop_the_blame_without_moving_it():
    w = oracles.prefix_weights(AFTER, MASK, FAILED, rescale=False)
    assert w.tolist() == [[0, 0, 0, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]


def test_keep_close_gives_a_failed_rollouts_close_grpos_weight_unless_the_close_is_its_error():
    # row 0 fails at index 3, its close (end-of-sequence token) at 4; row 1 passed, close at 4; row 2 failed with its
    # error not located, close at 3; row 3 stopped short: its only marked token is its close, the error itself
    mask = torch.cat([MASK, torch.tensor([[1, 1, 1, 0, 0]], dtype=torch.bool)])
    after = torch.cat([AFTER, torch.tensor([[0, 0, 1, 0, 0]], dtype=torch.bool)])
    failed = torch.cat([FAILED, torch.tensor([True])])
    close = torch.tensor([[0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 0, 0, 1, 0], [0, 0, 1, 0, 0]], dtype=torch.bool)
    w = oracles.prefix_weights(after, mask, failed, close=close)
    # row 0: 2.5 on both blamed tokens after the rescale, then the close back to 1; the others as oracle-prefix
    assert w.tolist() == [[0, 0, 0, 2.5, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 0], [0, 0, 3, 0, 0]]
    assert torch.equal(w[1:], oracles.prefix_weights(after, mask, failed)[1:])
    with pytest.raises(ValueError, match="keep_close"):
        oracles.register("two_sided", "gear", options={"keep_close": True})


def test_a_passed_rollout_keeps_its_weights_even_when_marked():
    w = oracles.prefix_weights(AFTER, MASK, torch.tensor([False, False, True]))
    assert w[0].tolist() == [1, 1, 1, 1, 1]


def test_two_sided_weights_by_hand():
    w = oracles.two_sided_weights(AFTER, MASK, FAILED, eps=0.5)
    # row 0 raw: 0.5, 0.5, 0.5, 1.5, 1.5 (sum 4.5 over 5 tokens), rescaled by 5 / 4.5
    want = [v * 5 / 4.5 for v in (0.5, 0.5, 0.5, 1.5, 1.5)]
    assert w[0].tolist() == pytest.approx(want)
    assert w[0].mean().item() == pytest.approx(1.0)
    assert w[1:].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]]
    assert torch.allclose(
        oracles.two_sided_weights(AFTER, MASK, FAILED, eps=1.0), oracles.prefix_weights(AFTER, MASK, FAILED)
    )
    assert oracles.two_sided_weights(AFTER, MASK, FAILED, eps=0.0).tolist() == MASK.float().tolist()
    with pytest.raises(ValueError, match="eps"):
        oracles.two_sided_weights(AFTER, MASK, FAILED, eps=1.5)


def test_weights_ignore_padding():
    after = torch.tensor([[0, 0, 1, 1, 1]], dtype=torch.bool)  # marked on the padding too
    mask = torch.tensor([[1, 1, 1, 1, 0]], dtype=torch.bool)
    w = oracles.prefix_weights(after, mask, torch.tensor([True]))
    assert w.tolist() == [[0, 0, 2, 2, 0]]  # 4 model tokens / 2 blamed ones


def test_process_advantages_by_hand():
    # one group of 4 rollouts, 2 decisions; a second group of 2 where decision 1 is missing in one rollout
    correct = torch.tensor(
        [[1, 1], [1, 0], [0, 0], [0, 0], [1, 1], [0, float("nan")]],
    )
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    adv = oracles.process_advantages(correct, groups)
    # group 0, decision 0: values 1, 1, 0, 0: mean 0.5, sample std sqrt(1/3)
    s = math.sqrt(1 / 3)
    assert adv[:4, 0].tolist() == pytest.approx([0.5 / s, 0.5 / s, -0.5 / s, -0.5 / s])
    # decision 1: 1, 0, 0, 0: mean 0.25, sample std 0.5
    assert adv[:4, 1].tolist() == pytest.approx([1.5, -0.5, -0.5, -0.5])
    # group 1, decision 0: 1, 0: mean 0.5, std sqrt(0.5); decision 1: only one rollout has it -> 0
    assert adv[4:, 0].tolist() == pytest.approx([0.5 / math.sqrt(0.5), -0.5 / math.sqrt(0.5)])
    assert adv[4:, 1].tolist() == [0.0, 0.0]


def test_a_decision_every_rollout_gets_right_gives_no_advantage():
    adv = oracles.process_advantages(torch.tensor([[1.0, 1.0], [1.0, 0.0]]), torch.tensor([0, 0]))
    assert adv[:, 0].tolist() == [0.0, 0.0]
    assert adv[:, 1].tolist() == pytest.approx([1 / math.sqrt(0.5) / 2, -1 / math.sqrt(0.5) / 2])


def test_process_token_advantages_by_hand():
    owner = torch.tensor([[-1, 0, 0, 1, 1, -1]])
    decision_adv = torch.tensor([[0.7, -1.2]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    adv = oracles.process_token_advantages(owner, decision_adv, torch.tensor([-0.3]), mask)
    assert adv[0].tolist() == pytest.approx([-0.3, 0.7, 0.7, -1.2, -1.2, 0.0])


# "Start from 23 and apply in turn: + 5, - 3." has the reference "23 + 5 = 28\n28 - 3 = 25".
PROMPT = "user\nStart from 23 and apply in turn: + 5, - 3.\n\nPlease reason step by step."
WRONG = ["<think>\n\n</think>\n\n", "2", "3", " +", " ", "5", " =", " ", "2", "9", "\n", "2", "9", " -", " ", "3",
         " =", " ", "2", "6", "<|im_end|>", "<pad>"]  # fmt: skip
WRONG_MASK = [True] * 21 + [False]


def test_error_site_and_decisions_on_tokens():
    row = {"prompt": PROMPT, "mask": WRONG_MASK}
    assert oracles.horizon_error_site(WRONG, row) == 9  # the "9" of "29"
    owner, correct = oracles.decisions_of_tokens(WRONG, row)
    assert correct == [0.0, 0.0]  # chained: the second line carries the error
    assert owner[0] == -1 and owner[1:11] == [0] * 10 and owner[11:20] == [1] * 9 and owner[20:] == [-1, -1]
    # stopping short: the error is where it stopped, its end-of-sequence token
    short = ["2", "3", " +", " ", "5", " =", " ", "2", "8", "\n", "<|im_end|>"]
    assert oracles.horizon_error_site(short, {"prompt": PROMPT, "mask": [True] * 11}) == 10
    right = ["2", "3", " +", " ", "5", " =", " ", "2", "8", "\n", "2", "8", " -", " ", "3", " =", " ", "2", "5"]
    assert oracles.horizon_error_site(right, {"prompt": PROMPT, "mask": [True] * 19}) is None
    assert oracles.horizon_error_site(right, {"prompt": "Compute 3 + 4.", "mask": [True] * 19}) is None
    assert oracles.decisions_of_tokens(right, {"prompt": PROMPT, "mask": [True] * 19})[1] == [1.0, 1.0]


def test_local_step_labels_do_not_blame_a_consistent_line():
    row = {"prompt": PROMPT, "mask": WRONG_MASK}
    owner, correct = oracles.decisions_of_tokens(WRONG, row, local=True)
    assert correct == [0.0, 1.0]  # "29 - 3 = 26" is a right step from the carried 29
    assert owner == oracles.decisions_of_tokens(WRONG, row)[0]


def test_error_span_is_the_first_wrong_line_only():
    row = {"prompt": PROMPT, "mask": WRONG_MASK}
    # the "9" of "29" (index 9) and its newline (10); not the second line, not the end token
    assert oracles.error_span(WRONG, row) == (9, 11)
    # three lines, the error on the second: its span ends at that line's newline
    tokens = ["2", "3", " +", " ", "5", " =", " ", "2", "8", "\n", "2", "8", " -", " ", "3", " =", " ", "2", "4",
              "\n", "2", "4", " +", " ", "1", " =", " ", "2", "5", "<|im_end|>"]  # fmt: skip
    three = {"prompt": "user\nStart from 23 and apply in turn: + 5, - 3, + 1.", "mask": [True] * len(tokens)}
    assert oracles.error_span(tokens, three) == (18, 20)
    # stopping short: the site is the end token, outside every line: the span is that token
    short = ["2", "3", " +", " ", "5", " =", " ", "2", "8", "\n", "<|im_end|>"]
    assert oracles.error_span(short, {"prompt": PROMPT, "mask": [True] * 11}) == (10, 11)
    right = ["2", "3", " +", " ", "5", " =", " ", "2", "8", "\n", "2", "8", " -", " ", "3", " =", " ", "2", "5"]
    assert oracles.error_span(right, {"prompt": PROMPT, "mask": [True] * 19}) is None


def test_first_error_weights_blame_the_span_at_mean_one():
    span = torch.zeros(1, 21, dtype=torch.bool)
    span[0, 9:11] = True
    mask = torch.tensor([WRONG_MASK[:21]])
    w = oracles.prefix_weights(span, mask, torch.tensor([True]))
    assert w[0, 9:11].tolist() == [10.5, 10.5] and w[0, :9].sum() == 0 and w[0, 11:].sum() == 0
    assert w[0].mean().item() == pytest.approx(1.0)


def test_close_mask_finds_the_end_of_sequence_token_of_real_decoded_rollouts():
    """`oracle-prefix-keep-close` finds each rollout's close on tokens as the trainer decodes them (the shipped
    independent warm start's tokenizer): a finished rollout's `<|im_end|>`, none in a rollout cut at the limit."""
    from transformers import AutoTokenizer

    from gear_trl.reporting.rows import decode_tokens

    tokenizer = AutoTokenizer.from_pretrained(REPO_ROOT / "data" / "tiny-qwen3-horizon-independent")
    finished = tokenizer("14 - 4 = 10\n78 - 3 = 75<|im_end|>")["input_ids"]
    cut = tokenizer("14 - 4 = 10\n78 - 3 = 75\n96")["input_ids"]
    pad = tokenizer.pad_token_id
    width = max(len(finished), len(cut)) + 1
    rows = []
    for ids in (finished, cut):
        padded = ids + [pad] * (width - len(ids))
        rows.append({"tokens": decode_tokens(tokenizer, padded), "mask": [k < len(ids) for k in range(width)]})
    close = oracles.close_mask(rows)
    assert close.shape == (2, width)
    assert close[0].nonzero().flatten().tolist() == [len(finished) - 1]
    assert rows[0]["tokens"][len(finished) - 1] == "<|im_end|>"
    assert not close[1].any()


# ---------------------------------------------------------------------------------------------------------------------
# Through the registered credit modes: what the trainer runs


class TextTokenizer:
    """A tokenizer over a fixed vocabulary whose decode is the concatenation of the token texts."""

    def __init__(self, vocab: list[str]):
        self.vocab = vocab
        self.ids = {text: i for i, text in enumerate(vocab)}

    def encode(self, tokens: list[str]) -> list[int]:
        return [self.ids[t] for t in tokens]

    def decode(self, ids, skip_special_tokens=False, clean_up_tokenization_spaces=False):
        return "".join(self.vocab[i] for i in ids if not (skip_special_tokens and self.vocab[i].startswith("<|")))

    def batch_decode(self, rows, skip_special_tokens=False):
        return [self.decode(list(row), skip_special_tokens) for row in rows]


def config():
    """GEARConfig's defaults, as the credit functions read them."""
    import dataclasses
    import types

    from gear_trl import GEARConfig

    fields = {f.name: f.default for f in dataclasses.fields(GEARConfig) if f.default is not dataclasses.MISSING}
    return types.SimpleNamespace(**fields)


def horizon_inputs(base: list[float]):
    """Two rollouts of PROMPT: WRONG (failed at " 9" of its first line) and the right one padded to its length."""
    from gear_trl.credit.modes import CreditInputs

    right = ["<think>\n\n</think>\n\n", "2", "3", " +", " ", "5", " =", " ", "2", "8", "\n", "2", "8", " -", " ", "3",
             " =", " ", "2", "5", "<|im_end|>", "<pad>"]  # fmt: skip
    tokenizer = TextTokenizer(sorted({*WRONG, *right, PROMPT}))
    completion_ids = torch.tensor([tokenizer.encode(WRONG), tokenizer.encode(right)])
    mask = torch.tensor([WRONG_MASK, [True] * 21 + [False]])
    shape = completion_ids.shape
    return CreditInputs(
        kl=torch.rand(shape),
        entropy=torch.rand(shape),
        log_ratio=None,
        mask=mask,
        base=torch.tensor(base),
        options=config(),
        completion_ids=completion_ids,
        prompt_ids=torch.tensor([tokenizer.encode([PROMPT])] * 2),
        tokenizer=tokenizer,
    )


def test_a_weighting_registers_as_a_credit_mode_gear_config_accepts():
    from gear_trl.credit.modes import credit_mode, credit_modes

    name = oracles.register("prefix", "gear", options={"rescale": False})
    assert name == "oracle-prefix-on-gear-rescale-false" and name in credit_modes()
    mode, gear = credit_mode(name), credit_mode("gear")
    assert (mode.teacher, mode.segmenter, mode.onsets, mode.options) == (gear.teacher, gear.segmenter, gear.onsets,
                                                                         gear.options)  # fmt: skip
    assert oracles.register("prefix", "gear", options={"rescale": False}) == name  # again: replaced, not refused
    with pytest.raises(ValueError, match="oracle must be"):
        oracles.register("everything", "gear")


def test_prefix_mode_puts_its_weights_in_place_of_gears_on_a_decoded_batch():
    from gear_trl.credit.modes import credit_mode

    inputs = horizon_inputs([-1.0, 1.0])
    out = credit_mode(oracles.register("prefix", "gear")).compute(inputs)
    # row 0: its first wrong token is " 9" (index 9): 0 before, and the 12 model tokens from it on share 21 / 12
    site = oracles.horizon_error_site(WRONG, {"prompt": PROMPT, "mask": WRONG_MASK})
    assert site == 9
    assert out.weights[0, :site].tolist() == [0.0] * site
    assert out.weights[0, site:21].tolist() == pytest.approx([21 / 12] * 12)
    assert out.weights[1].tolist() == [1.0] * 21 + [0.0]  # passed: GRPO's weights
    assert torch.equal(out.advantages, inputs.base[:, None] * out.weights)
    # GEAR's segments on a zero KL, as the trace the oracle's weights replace
    gear = credit_mode("gear").compute(dataclasses.replace(inputs, kl=torch.zeros_like(inputs.kl)))
    assert torch.equal(out.segment_ids, gear.segment_ids) and torch.equal(out.signal, gear.signal)


def test_process_mode_sets_the_advantages_and_keeps_gears_weights():
    from gear_trl.credit.modes import credit_mode

    inputs = horizon_inputs([-1.0, 1.0])
    out = credit_mode(oracles.register("process", "gear")).compute(inputs)
    gear = credit_mode("gear").compute(dataclasses.replace(inputs, kl=torch.zeros_like(inputs.kl)))
    assert torch.equal(out.weights, gear.weights)
    owner, correct = oracles.decisions_of_tokens(WRONG, {"prompt": PROMPT, "mask": WRONG_MASK})
    right_owner, right_correct = oracles.decisions_of_tokens(
        [inputs.tokenizer.vocab[i] for i in inputs.completion_ids[1].tolist()],
        {"prompt": PROMPT, "mask": [True] * 21 + [False]},
    )
    matrix = torch.tensor([correct, right_correct])
    want = oracles.process_token_advantages(
        torch.tensor([owner, right_owner]), oracles.process_advantages(matrix, torch.tensor([0, 0])), inputs.base,
        inputs.mask,
    )  # fmt: skip
    assert torch.equal(out.advantages, want)


def test_item_list_prompts_get_their_own_labels():
    """The process oracle and the error site read the item-list family too (bench/pretrained_credit.py's
    `oracle-process`): each line a decision, right when it is its item."""
    prompt = "Write these words one per line, in the same order: cat, fox, owl."
    tokens = ["cat", "\n", "dog", "\n", "owl", "<|im_end|>"]
    row = {"prompt": prompt, "mask": [True] * 6}
    owner, correct = oracles.decisions_of_tokens(tokens, row)
    assert owner == [0, 0, 1, 1, 2, -1] and correct == [1.0, 0.0, 1.0]
    assert oracles.decisions_of_tokens(tokens, row, local=True)[1] == [1.0, 0.0, 1.0]  # no step reading: the same
    assert oracles.horizon_error_site(tokens, row) == 2  # "dog" departs from "fox" at its first character
    short = ["cat", "\n", "fox", "<|im_end|>"]
    assert oracles.horizon_error_site(short, {"prompt": prompt, "mask": [True] * 4}) == 3  # stopped short: the close
    assert oracles.error_site_for("item_lists") is oracles.horizon_error_site
    assert oracles.decisions_of_tokens(tokens, {"prompt": "no task here", "mask": [True] * 6}) == ([-1] * 6, [])


def test_numbered_item_list_prompts_are_read_with_their_variants_labels():
    """`numbered` lines are read as their items (`item_lists.labels`): `1. Cat` is right, the error site is in the
    item's text, not at the number."""
    prompt = "Repeat this numbered list exactly:\n1. cat\n2. fox\n3. owl"
    tokens = ["1", ".", " Cat", "\n", "2", ".", " dog", "\n", "3", ".", " owl", "<|im_end|>"]
    row = {"prompt": prompt, "mask": [True] * len(tokens)}
    owner, correct = oracles.decisions_of_tokens(tokens, row)
    assert owner == [0] * 4 + [1] * 4 + [2] * 3 + [-1] and correct == [1.0, 0.0, 1.0]
    assert oracles.horizon_error_site(tokens, row) == 6  # " dog": the "d" departs from "fox"
