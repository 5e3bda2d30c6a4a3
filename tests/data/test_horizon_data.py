"""The horizon task family: generator, labels (first wrong token, per-decision correctness), reward."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gear_trl.data.math_tasks import GENERIC
from gear_trl.rewards import get_reward_funcs
from gear_trl.rewards.horizon import (
    decision_correct,
    decision_of_char,
    decision_spans,
    first_wrong_char,
    horizon_accuracy,
    horizon_problem,
    make_problem,
    question,
    reference_lines,
    step_correct,
)

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "data" / "scripts" / "make_horizon_data.py"
sys.path.insert(0, str(SCRIPT.parent))
import make_horizon_data

CHAINED = make_problem("chained", 23, [("+", 5), ("-", 3), ("+", 8)])
INDEPENDENT = make_problem("independent", None, [(23, "+", 5), (41, "-", 3), (67, "+", 8)])


def test_problems_questions_and_reference_solutions_by_hand():
    assert question(CHAINED) == "Start from 23 and apply in turn: + 5, - 3, + 8."
    assert reference_lines(CHAINED) == "23 + 5 = 28\n28 - 3 = 25\n25 + 8 = 33"
    assert CHAINED.results == [28, 25, 33]
    assert question(INDEPENDENT) == "Work out each line: 23 + 5, 41 - 3, 67 + 8."
    assert reference_lines(INDEPENDENT) == "23 + 5 = 28\n41 - 3 = 38\n67 + 8 = 75"
    # "23 + 5 = " is 9 characters; each line is 11 plus its newline
    assert decision_spans(INDEPENDENT) == [(9, 11), (21, 23), (33, 35)]


def test_the_problem_is_read_back_from_the_prompt_the_trainer_shows():
    for problem in (CHAINED, INDEPENDENT):
        messages = GENERIC({"prompt": question(problem), "ground_truth": "1"})["prompt"]
        assert horizon_problem(messages) == problem
        assert horizon_problem(messages[-1]["content"]) == problem
    assert horizon_problem("Compute 3 + 4.") is None
    assert horizon_problem("Work out each line: 3 + x.") is None
    assert horizon_problem(None) is None


def test_first_wrong_character_on_hand_made_completions():
    ref = reference_lines(CHAINED)  # "23 + 5 = 28\n28 - 3 = 25\n25 + 8 = 33"
    assert first_wrong_char(ref, ref) is None
    assert first_wrong_char("<think>\n\n</think>\n\n" + ref, ref) is None
    # a wrong second decision: "28 - 3 = 24" departs at its last digit, index 12 + 10
    wrong = "23 + 5 = 28\n28 - 3 = 24\n24 + 8 = 32"
    assert first_wrong_char(wrong, ref) == 22
    # after the think block the same site moves by the block's length
    assert first_wrong_char("<think>\n\n</think>\n\n" + wrong, ref) == 19 + 22
    # a miscopied carried value is an execution-token error: the first wrong character is there
    assert first_wrong_char("23 + 5 = 28\n29 - 3 = 26", ref) == 13
    # stopping early: the site is the end of the text; writing more than the reference: the first extra character
    assert first_wrong_char("23 + 5 = 28\n", ref) == 12
    assert first_wrong_char(ref + "\n33 + 1 = 34", ref) == len(ref) + 1
    assert first_wrong_char(ref + "\n", ref) is None
    assert first_wrong_char("I do not know", ref) is None


def test_decision_correctness_independent_and_chained():
    # independent: a wrong first result leaves the later decisions right
    assert decision_correct("23 + 5 = 29\n41 - 3 = 38\n67 + 8 = 75", INDEPENDENT.results) == [False, True, True]
    # chained: the error propagates; a later line computed right from the wrong value is still a wrong decision
    assert decision_correct("23 + 5 = 29\n29 - 3 = 26\n26 + 8 = 34", CHAINED.results) == [False, False, False]
    # a missing line is a wrong decision
    assert decision_correct("23 + 5 = 28\n28 - 3 = 25", CHAINED.results) == [True, True, False]
    assert decision_correct([{"role": "assistant", "content": "x"}], CHAINED.results) == [False, False, False]


def test_step_correctness_is_each_line_given_the_ones_before():
    # chained: a line computed right from the wrong carried value is a right step, a wrong sum a wrong one
    assert step_correct("23 + 5 = 29\n29 - 3 = 26\n26 + 8 = 35", CHAINED) == [False, True, False]
    # a line that does not start from the value carried, or uses another operand or operator, is a wrong step
    assert step_correct("23 + 5 = 28\n27 - 3 = 24\n25 + 8 = 33", CHAINED) == [True, False, False]
    assert step_correct("23 + 5 = 28\n28 + 3 = 31\n31 + 8 = 39", CHAINED) == [True, False, True]
    # independent: each line's operands are the prompt's
    assert step_correct("23 + 5 = 29\n41 - 3 = 38\n67 + 8 = 75", INDEPENDENT) == [False, True, True]
    assert step_correct("23 + 5 = 28\n41 - 3 = 38", INDEPENDENT) == [True, True, False]  # a missing line
    assert step_correct([{"role": "assistant", "content": "x"}], CHAINED) == [False, False, False]
    # a number too long to be a step is no equation line: never an error
    assert step_correct("9" * 5000 + " + 5 = 28", CHAINED) == [False, False, False]


def test_decision_of_each_character():
    text = "ok\n23 + 5 = 28\n28 - 3 = 25\nend"
    owner = decision_of_char(text, 2)
    assert owner[:3] == [-1, -1, -1]
    assert set(owner[3:15]) == {0} and len(owner[3:15]) == 12  # "23 + 5 = 28\n"
    assert set(owner[15:27]) == {1}
    assert owner[27:] == [-1, -1, -1]
    assert decision_of_char(text, 1)[15:27] == [-1] * 12  # only the first k lines are decisions


def test_reward_is_one_only_when_every_decision_is_right():
    truth = "28,25,33"
    right = reference_lines(CHAINED)
    completions = [
        right,
        "<think>\n\n</think>\n\n" + right,  # other lines are ignored
        [{"role": "assistant", "content": right}],
        "23 + 5 = 28\n28 - 3 = 25\n25 + 8 = 34",  # last decision wrong
        "23 + 5 = 28\n28 - 3 = 25",  # one line short
        right + "\n33 + 1 = 34",  # one line too many
        "",
    ]
    assert horizon_accuracy(completions, [truth] * len(completions)) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert horizon_accuracy([right, right], [None, "not numbers"]) == [None, None]
    (func,) = get_reward_funcs(["horizon_accuracy"])
    assert func is horizon_accuracy


def test_generator_is_deterministic_and_its_labels_agree_with_the_reward(tmp_path):
    a, _ = make_horizon_data.generate(7, [2, 5], n_train=30, n_test=10)
    b, _ = make_horizon_data.generate(7, [5], n_train=30, n_test=10)
    assert a[("chained", 5)] == b[("chained", 5)]  # a (variant, K)'s rows do not depend on the other Ks
    for (variant, k), splits in a.items():
        train = {row["prompt"] for row in splits["train"]}
        assert not train & {row["prompt"] for row in splits["test"]}
        for row in splits["train"] + splits["test"]:
            assert row["variant"] == variant and row["k"] == k == len(row["results"])
            problem = horizon_problem(row["prompt"])
            assert reference_lines(problem) == row["reference_solution"]
            assert all(10 <= r <= 99 for r in row["results"])
            for (start, end), result in zip(row["decision_spans"], row["results"], strict=True):
                assert row["reference_solution"][start:end] == str(result)
            assert horizon_accuracy([row["reference_solution"]], [row["ground_truth"]]) == [1.0]
            if variant == "chained":
                lefts = [int(step.split()[0]) for step in row["steps"]]
                assert lefts[1:] == row["results"][:-1]


def test_steps_cross_no_tens_boundary_unless_carries_are_asked_for():
    def crossings(rows):
        return sum(
            int(step.split()[0]) // 10 != result // 10
            for row in rows
            for step, result in zip(row["steps"], row["results"], strict=True)
        )

    plain, _ = make_horizon_data.generate(7, [8], n_train=50, n_test=10)
    carrying, _ = make_horizon_data.generate(7, [8], n_train=50, n_test=10, carries=True)
    for variant in ("independent", "chained"):
        assert crossings(plain[(variant, 8)]["train"] + plain[(variant, 8)]["test"]) == 0
        assert crossings(carrying[(variant, 8)]["train"]) > 50  # about 4 steps in 10 of 400 carry or borrow


def test_too_few_distinct_problems_is_an_error_not_a_hang():
    # K = 1 without carries: 90 starts x 9 steps = 810 problems, fewer than 1,000 train + 200 test
    with pytest.raises(ValueError, match="K=1"):
        make_horizon_data.generate(0, [1], n_train=1000, n_test=200)


def test_committed_data_is_what_the_script_writes(tmp_path):
    out = tmp_path / "horizon"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out-dir", str(out), "--ks", "4"], check=True, capture_output=True, cwd=REPO
    )
    for variant, split in itertools.product(("independent", "chained"), ("train", "test")):
        written = (out / variant / "k4" / f"{split}.jsonl").read_bytes()
        assert written == (REPO / "data" / "horizon" / variant / "k4" / f"{split}.jsonl").read_bytes()
    row = json.loads((out / variant / "k4" / "test.jsonl").read_text().splitlines()[0])
    assert set(row) >= {"prompt", "ground_truth", "reference_solution", "decision_spans"}


def test_sft_rows_avoid_test_problems_and_carry_teacher_prompts(tmp_path):
    path = tmp_path / "sft.jsonl"
    make_horizon_data.main(
        ["--no-task", "--sft-variant", "chained", "--sft-ks", "2", "--n-sft", "40", "--sft-out", str(path),
         "--n-test", "20", "--n-train", "5"]
    )  # fmt: skip
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    tests, _ = make_horizon_data.generate(1234, [2], n_train=5, n_test=20)
    test_prompts = {row["prompt"] for row in tests[("chained", 2)]["test"]}
    users = [row["messages"][0]["content"] for row in rows]
    assert not {u.split("\n")[0] for u in users} & test_prompts
    assert sum("reference answer" in u for u in users) == 14 and sum("reference solution" in u for u in users) == 14
    for row in rows:
        problem = horizon_problem(row["messages"][0]["content"])
        assert row["messages"][1]["content"] == reference_lines(problem)


def test_committed_train_and_test_problems_are_apart():
    """Every shipped (variant, K): no test problem is a training problem (the study trains on train, evaluates on test)."""
    for folder in sorted((REPO / "data" / "horizon").glob("*/k*")):
        splits = {
            split: {json.loads(line)["prompt"] for line in (folder / f"{split}.jsonl").read_text().splitlines()}
            for split in ("train", "test")
        }
        assert splits["train"] and splits["test"], folder
        assert not splits["train"] & splits["test"], folder
