"""`gear_trl.evaluate --benchmark NAME`: every preset run end to end on a few local rows in its dataset's schema
(tests/fixtures/benchmarks/), the docs table and `--help` current, and our math scoring checked against lighteval's
math metric on generated cases."""

from __future__ import annotations

import json
import random
import re

import pytest
import torch
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from transformers import AutoTokenizer

from gear_trl.evaluation.benchmarks import PRESETS, get_preset, presets_table
from gear_trl.evaluation.cli import main, make_parser
from gear_trl.inputs.errors import UserInputError
from gear_trl.rewards.math_rewards import is_correct
from tests.utils import StandInModel

TINY = "data/tiny-qwen3"
FIXTURES = "tests/fixtures/benchmarks"
MATH_PRESETS = ["math500", "math", "gsm8k", "aime24", "aime25"]
# Per fixture row, an answer equivalent to its reference but written differently, as a model might write it.
EQUIVALENT = {
    "math500": ["50", "0.75", "\\sqrt{12}"],
    "math": ["6", "5", "\\frac{10}{12}"],
    "gsm8k": ["26", "150.0", "80"],
    "aime24": ["24", "19", "120"],
    "aime25": ["56", "14", "120"],
}


class Oracle(StandInModel):
    """A stand-in model: reads which fixture problem a prompt holds and answers it with `answers[i]` in a final
    `\\boxed{}`, every sample alike."""

    def __init__(self, tokenizer, questions, answers):
        self.tokenizer, self.questions, self.answers = tokenizer, questions, answers
        self.seen = []

    def generate(self, input_ids, attention_mask, generation_config):
        self.seen.append(generation_config)
        rows = []
        for ids in input_ids.tolist():
            prompt = self.tokenizer.decode(ids, skip_special_tokens=True)
            (i,) = [i for i, question in enumerate(self.questions) if question in prompt]
            text = f"Adding up.\nTherefore, the final answer is: $\\boxed{{{self.answers[i]}}}$. I hope it is correct"
            answer = self.tokenizer(text)["input_ids"] + [self.tokenizer.eos_token_id]
            rows += [ids + answer] * generation_config.num_return_sequences
        width = max(map(len, rows))
        return torch.tensor([row + [self.tokenizer.eos_token_id] * (width - len(row)) for row in rows])


def _questions(name):
    preset = get_preset(name)
    path = f"{FIXTURES}/{name}/{preset.split}.jsonl"
    with open(path) as handle:
        rows = [json.loads(line) for line in handle]
    return [row.get("problem") or row.get("question") for row in rows]


def _run(tmp_path, monkeypatch, name, answers, *extra):
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    oracle = Oracle(tokenizer, _questions(name), answers)
    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", lambda *a, **k: (oracle, tokenizer))
    output = tmp_path / f"{name}.json"
    argv = ["--model", TINY, "--benchmark", name, "--dataset", f"{FIXTURES}/{name}", "--batch_size", "3"]
    main([*argv, "--output", str(output), "--no_progress", *extra])
    return json.loads(output.read_text()), oracle


@pytest.mark.parametrize("name", MATH_PRESETS)
def test_every_math_preset_reads_its_schema_and_scores_equivalent_answers_correct(tmp_path, monkeypatch, name):
    preset = get_preset(name)
    report, oracle = _run(tmp_path, monkeypatch, name, EQUIVALENT[name])
    k = preset.num_samples
    assert report["n"] == 3 and report["num_samples"] == k and len(report["per_sample"]) == 3 * k
    assert report["accuracy"] == report[f"avg@{k}"] == 1.0
    config = report["config"]
    assert (config["split"], config["dataset_config"], config["dataset_format"]) == (
        preset.split,
        preset.dataset_config,
        preset.dataset_format,
    )
    assert (config["temperature"], config["top_p"], config["max_new_tokens"]) == (0.6, 0.95, 32768)
    generation = oracle.seen[0]
    assert generation.do_sample and generation.temperature == 0.6 and generation.top_p == 0.95
    assert generation.num_return_sequences == k
    prompt = report["per_sample"][0]["prompt"][-1]["content"]
    assert prompt.endswith("Please reason step by step, and put your final answer within \\boxed{}.")
    if k > 1:
        assert report["pass_at_k"] == 1.0 and report["pass_at"]["1"] == 1.0

    wrong = [str(i + 1000) for i in range(3)]
    report, _ = _run(tmp_path, monkeypatch, name, wrong, "--num_samples", "2", "--max_new_tokens", "64")
    assert report["accuracy"] == 0.0 and report["num_samples"] == 2 and report["pass_at_k"] == 0.0
    assert report["config"]["max_new_tokens"] == 64  # a flag given wins over the preset


def test_help_lists_every_preset_and_the_docs_table_is_current():
    text = make_parser().format_help()
    for preset in PRESETS.values():
        assert re.search(
            rf"^\s+{preset.name}\s+{re.escape(preset.title)}: {re.escape(preset.dataset)}", text, re.MULTILINE
        )
    with open("docs/evaluation.md") as handle:
        docs = handle.read()
    assert presets_table() in docs, "docs/evaluation.md: paste gear_trl.evaluation.benchmarks.presets_table() into it"


def test_preset_names_are_forgiving_and_unknown_ones_are_named():
    assert get_preset("MATH-500").name == "math500" and get_preset("AIME_24").name == "aime24"
    with pytest.raises(UserInputError, match="aime25"):
        get_preset("aime26")
    with pytest.raises(UserInputError, match="--benchmark"):
        main(["--model", TINY])


# --- agreement with lighteval's math metric ---------------------------------------------------------------------
# lighteval is not installable beside this project (lighteval 0.13 pins latex2sympy2_extended 1.0.6; math-verify 0.9
# here needs 1.11). Its `pass_at_k_math` / `avg_at_n_math` (lighteval/metrics/metrics.py) score a sample with
# `MultilingualExtractiveMatchMetric(gold_extraction_target=[Expr, Latex], pred_extraction_target=[Expr, Latex],
# precision=6)`, which extracts with fallback "first_match" and mode "any_match" and compares with precision 6: the
# extraction and comparison that math-verify (split out of lighteval) exposes as `parse` and `verify`. This reference
# is that documented behaviour; the cases are answers in the prompt formats the presets ask for.


def lighteval_math_metric(completion: str, gold: str) -> bool:
    """`gold` is the reference answer; lighteval's tasks hand it over inside the solution's `\\boxed{}` (MATH,
    MATH-500) or bare (AIME's integers), and a bare integer parses alike boxed."""
    targets = [ExprExtractionConfig(), LatexExtractionConfig()]
    gold = f"\\boxed{{{gold}}}"
    gold_parsed = parse(gold, extraction_config=targets, fallback_mode="first_match", extraction_mode="any_match")
    if not gold_parsed:  # lighteval then compares the gold string itself
        gold_parsed = [gold]
    pred = parse(completion, extraction_config=targets, fallback_mode="first_match", extraction_mode="any_match")
    return bool(pred) and verify(gold_parsed, pred, float_rounding=6)


def _cases(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        kind = rng.choice(["int", "frac", "decimal", "sqrt", "negative", "aime"])
        a, b = rng.randint(1, 99), rng.randint(2, 12)
        gold, same, wrong = {
            "int": (str(a), [str(a), f"{a}.0"], [str(a + 1)]),
            "frac": (
                f"\\frac{{{a}}}{{{b}}}",
                [f"\\frac{{{2 * a}}}{{{2 * b}}}", f"{a}/{b}"],
                [f"\\frac{{{a + b}}}{{{b}}}"],
            ),
            "decimal": (f"{a / 4}", [f"\\frac{{{a}}}{{4}}", f"{a / 4}"], [f"{(a + 1) / 4}"]),
            "sqrt": (
                f"{a}\\sqrt{{{b}}}",
                [f"{a}\\sqrt{{{b}}}", f"\\sqrt{{{b}}}\\cdot {a}"],
                [f"{a + 1}\\sqrt{{{b}}}"],
            ),
            "negative": (f"-{a}", [f"-{a}", f"-\\frac{{{2 * a}}}{{2}}"], [str(a)]),
            "aime": (f"{a:03d}", [str(a)], [str(a + 1)]),
        }[kind]
        for answer, correct in [(x, True) for x in same] + [(x, False) for x in wrong]:
            style = rng.choice(
                [
                    "So we get {x}, hence \\boxed{{{x}}}.",
                    "Therefore, the final answer is: $\\boxed{{{x}}}$. I hope it is correct",
                    "Step 1: compute.\n\nThe answer is $\\boxed{{{x}}}$",
                ]
            )
            yield gold, style.format(x=answer), correct


def test_math_scoring_agrees_with_lightevals_math_metric_on_generated_cases():
    cases = list(_cases(seed=0, count=60))
    disagreements = [(g, c) for g, c, _ in cases if is_correct(c, g) != lighteval_math_metric(c, g)]
    assert not disagreements, disagreements[:5]
    # and both are right: the generated equivalent answers pass, the changed ones fail
    assert all(is_correct(c, g) == correct for g, c, correct in cases)
    assert len(cases) >= 150


def test_where_the_two_differ_by_design_several_boxes():
    # Only the last box is our answer (a model that corrects itself); lighteval's any_match accepts any boxed match.
    text = "First \\boxed{3}, no wait: \\boxed{4}."
    assert is_correct(text, "4") and not is_correct(text, "3")
