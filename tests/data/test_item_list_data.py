"""The item-list task family: generator, labels (first wrong character, per-decision correctness), reward."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gear_trl.data.math_tasks import GENERIC
from gear_trl.rewards import get_reward_funcs
from gear_trl.rewards.item_lists import (
    decision_correct,
    decision_of_char,
    decision_spans,
    first_wrong_char,
    item_list_accuracy,
    item_list_problem,
    labels,
    line_item,
    make_problem,
    numbered_list_accuracy,
    parse_ground_truth,
    question,
    reference_lines,
)

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "data" / "scripts" / "make_item_list_data.py"
sys.path.insert(0, str(SCRIPT.parent))
import make_item_list_data

COPY = make_problem("copy", ["cat", "river", "lamp"])
REF = "cat\nriver\nlamp"
TRUTH = "cat,river,lamp"


def test_problem_question_and_reference_solution_by_hand():
    assert question(COPY) == "Write these words one per line, in the same order: cat, river, lamp."
    assert reference_lines(COPY) == REF
    assert decision_spans(COPY) == [(0, 3), (4, 9), (10, 14)]
    assert parse_ground_truth(TRUTH) == ["cat", "river", "lamp"]
    assert parse_ground_truth("cat,,lamp") is None and parse_ground_truth(None) is None
    with pytest.raises(ValueError):
        make_problem("copy", ["Cat"])
    with pytest.raises(ValueError):
        make_problem("reverse", ["cat"])


def test_the_problem_is_read_back_from_the_prompt_the_trainer_shows():
    messages = GENERIC({"prompt": question(COPY), "ground_truth": TRUTH})["prompt"]
    assert item_list_problem(messages) == COPY
    assert item_list_problem(messages[-1]["content"] + "\nA reference solution ...") == COPY
    assert item_list_problem("Write these words one per line, in the same order: cat, 3.") is None
    assert item_list_problem("Write these words one per line, in the same order: cat, dog") is None  # no full stop
    assert item_list_problem("Compute 3 + 4.") is None
    assert item_list_problem(None) is None and item_list_problem([{"role": "user"}]) is None


def test_reward_on_hand_made_completions():
    completions = [
        REF,  # right
        "\n  cat \n\nriver\nlamp\n",  # blank lines and spaces at a line's ends are not departures
        [{"role": "assistant", "content": REF}],
        "cat\nriver\nlamb",  # one wrong line
        "cat\nriver",  # a missing line
        REF + "\ndog",  # an extra line
        "Sure!\n" + REF,  # an introduction is a line
        "1. cat\n2. river\n3. lamp",  # a numbered list
        "",
        None,
        {"content": REF},
        "x" * 100_000,
    ]
    assert item_list_accuracy(completions, [TRUTH] * len(completions)) == [1.0, 1.0, 1.0] + [0.0] * 9
    assert item_list_accuracy([REF, REF, REF], [None, 3, "cat,,lamp"]) == [None, None, None]
    (func,) = get_reward_funcs(["item_list_accuracy"])
    assert func is item_list_accuracy


def test_decision_correctness_per_line():
    items = ["cat", "river", "lamp"]
    assert decision_correct(REF, items) == [True, True, True]
    assert decision_correct("cat\nrivers\nlamp", items) == [True, False, True]  # one wrong line, the others right
    assert decision_correct("cat\nriver", items) == [True, True, False]  # a missing line is a wrong decision
    assert decision_correct(REF + "\ndog", items) == [True, True, True]  # an extra line is no decision
    assert decision_correct("river\nlamp", items) == [False, False, False]  # a skipped item shifts the rest
    assert decision_correct(None, items) == [False, False, False]
    assert decision_correct("\u2028" * 1000, items) == [False, False, False]


def test_first_wrong_character_on_hand_made_completions():
    assert first_wrong_char(REF, REF) is None
    assert first_wrong_char("\ncat \nriver\nlamp\n\n", REF) is None
    assert first_wrong_char("cat\nrover\nlamp", REF) == 5  # "r" of line 2 at 4, "o" where it departs
    assert first_wrong_char("cat\nriv\nlamp", REF) == 7  # a strict prefix: the character after it
    assert first_wrong_char("cat\nrivers\nlamp", REF) == 9  # a longer line: its first extra character
    assert first_wrong_char("cat\n  dog\nlamp", REF) == 6  # leading spaces are skipped
    assert first_wrong_char("cat\nriver\n", REF) == 10  # stopping early: the end of the text
    assert first_wrong_char(REF + "\ndog", REF) == len(REF) + 1  # an extra line: its first character
    assert first_wrong_char("1. cat", REF) == 0
    assert first_wrong_char("", REF) == 0
    assert first_wrong_char(None, REF) == 0
    assert first_wrong_char(REF, None) is None


def test_decision_of_each_character():
    text = "cat\n\n  river\nlamp"
    owner = decision_of_char(text, 3)
    assert owner[:4] == [0, 0, 0, 0]  # "cat\n"
    assert owner[4:7] == [-1, -1, -1]  # a blank line and the leading spaces
    assert owner[7:13] == [1] * 6  # "river\n"
    assert owner[13:] == [2] * 4
    assert decision_of_char(text, 1)[7:] == [-1] * 10  # only the first k lines are decisions
    assert decision_of_char(None, 3) == []


def test_generator_is_deterministic_and_its_labels_agree_with_the_reward():
    a = make_item_list_data.generate(7, [2, 5], n_train=40, n_test=10)
    b = make_item_list_data.generate(7, [5], n_train=40, n_test=10)
    assert a[("copy", 5)] == b[("copy", 5)]  # a (variant, K)'s rows do not depend on the other Ks
    assert make_item_list_data.generate(8, [5], n_train=40, n_test=10) != b
    for (variant, k), splits in a.items():
        assert (len(splits["train"]), len(splits["test"])) == (40, 10)
        assert not {row["prompt"] for row in splits["train"]} & {row["prompt"] for row in splits["test"]}
        for row in splits["train"] + splits["test"]:
            assert row["variant"] == variant and row["k"] == k == len(row["items"]) == len(set(row["items"]))
            problem = item_list_problem(row["prompt"])
            assert reference_lines(problem) == row["reference_solution"]
            assert all(item in make_item_list_data.WORDS for item in row["items"])
            for (start, end), item in zip(row["decision_spans"], row["items"], strict=True):
                assert row["reference_solution"][start:end] == item
            reward = numbered_list_accuracy if variant == "numbered" else item_list_accuracy
            assert reward([row["reference_solution"]], [row["ground_truth"]]) == [1.0]
            other = item_list_accuracy if variant == "numbered" else numbered_list_accuracy
            assert other([row["reference_solution"]], [row["ground_truth"]]) == [float(variant == "copy")]


def test_the_word_list_is_short_distinct_lowercase_nouns():
    words = make_item_list_data.WORDS
    assert len(words) == len(set(words)) >= 180
    assert all(word.isalpha() and word.islower() and 3 <= len(word) <= 7 for word in words)


def test_committed_data_is_what_the_script_writes(tmp_path):
    out = tmp_path / "item_lists"
    subprocess.run([sys.executable, str(SCRIPT), "--out-dir", str(out)], check=True, capture_output=True, cwd=REPO)
    for variant in ("copy", "numbered"):
        for k in (4, 6, 8):
            for split, size in (("train", 1000), ("test", 200)):
                written = (out / variant / f"k{k}" / f"{split}.jsonl").read_bytes()
                committed = REPO / "data" / "item_lists" / variant / f"k{k}" / f"{split}.jsonl"
                assert written == committed.read_bytes()
                assert len(written.splitlines()) == size
    row = json.loads((out / "copy" / "k8" / "test.jsonl").read_text().splitlines()[0])
    assert set(row) >= {"prompt", "ground_truth", "reference_solution", "decision_spans"}


def test_committed_train_and_test_problems_are_apart():
    folders = sorted((REPO / "data" / "item_lists").glob("*/k*"))
    assert [f"{folder.parent.name}/{folder.name}" for folder in folders] == [
        "copy/k4", "copy/k6", "copy/k8", "numbered/k4", "numbered/k6", "numbered/k8"]  # fmt: skip
    for folder in folders:
        splits = {
            split: {json.loads(line)["prompt"] for line in (folder / f"{split}.jsonl").read_text().splitlines()}
            for split in ("train", "test")
        }
        assert splits["train"] and splits["test"], folder
        assert not splits["train"] & splits["test"], folder


# -- the numbered variant ---------------------------------------------------------------------------------------------

NUMBERED = make_problem("numbered", ["cat", "river", "lamp"])
NUMBERED_REF = "1. cat\n2. river\n3. lamp"


def test_numbered_question_reference_and_spans_by_hand():
    assert question(NUMBERED) == "Repeat this numbered list exactly:\n1. cat\n2. river\n3. lamp"
    assert reference_lines(NUMBERED) == NUMBERED_REF
    assert decision_spans(NUMBERED) == [(3, 6), (10, 15), (19, 23)]  # the items, not their numbers
    assert [NUMBERED_REF[a:b] for a, b in decision_spans(NUMBERED)] == ["cat", "river", "lamp"]


def test_a_numbered_problem_is_read_back_without_what_the_teacher_appends():
    messages = GENERIC({"prompt": question(NUMBERED), "ground_truth": TRUTH})["prompt"]
    assert item_list_problem(messages) == NUMBERED
    teacher = question(NUMBERED) + "\n\nReference answer:\n" + NUMBERED_REF  # the reference lines are not items
    assert item_list_problem(teacher) == NUMBERED
    assert item_list_problem("Repeat this numbered list exactly:\n1. cat\n3. lamp") == make_problem("numbered", ["cat"])
    assert item_list_problem("Repeat this numbered list exactly:\n2. cat") is None  # no item 1: no problem
    assert item_list_problem("Repeat this numbered list exactly:") is None


def test_a_numbered_line_reads_as_its_item_with_its_own_marker_case_and_end_punctuation_aside():
    assert line_item("2. River.", 1, "numbered") == ("river", 3)
    assert line_item("2) river", 1, "numbered") == ("river", 3)
    assert line_item("- river", 1, "numbered") == ("river", 2)
    assert line_item("river", 1, "numbered") == ("river", 0)
    assert line_item("3. river", 1, "numbered") == ("3. river", 0)  # another line's number is not a marker
    assert line_item("1. river", 1, "copy") == ("1. river", 0)  # copy reads the line as it is


def test_numbered_reward_on_hand_made_completions():
    completions = [
        NUMBERED_REF,  # right
        "1. Cat\n2. river.\n\n3) LAMP",  # case, end punctuation, `)` and a blank line are not departures
        "cat\nriver\nlamp",  # the bare lines read as the items
        "- cat\n- river\n- lamp",
        "1. cat\n2. rover\n3. lamp",  # a wrong item
        "1. cat\n3. river\n3. lamp",  # a wrong number is not a marker
        "1. cat\n2. river",  # a missing line
        NUMBERED_REF + "\n4. dog",  # an extra line
        "Sure!\n" + NUMBERED_REF,  # an introduction is a line
        "1. cat, river, lamp",
        "",
        None,
        "x" * 100_000,
    ]
    assert numbered_list_accuracy(completions, [TRUTH] * len(completions)) == [1.0] * 4 + [0.0] * 9
    assert numbered_list_accuracy([NUMBERED_REF] * 2, [None, "cat,,lamp"]) == [None, None]
    (func,) = get_reward_funcs(["numbered_list_accuracy"])
    assert func is numbered_list_accuracy


def test_numbered_labels_agree_with_the_reward():
    items = ["cat", "river", "lamp"]
    lab = labels("numbered")
    assert lab.decision_correct("1. Cat\n2. rover\n3. lamp.", items) == [True, False, True]
    assert decision_correct("1. Cat\n2. rover\n3. lamp.", items) == [False, False, False]  # copy's reading
    assert lab.first_wrong_char(NUMBERED_REF, NUMBERED_REF) is None
    assert lab.first_wrong_char("1. Cat\n2. River.\n3. lamp", NUMBERED_REF) is None
    assert lab.first_wrong_char("1. cat\n2. rover\n3. lamp", NUMBERED_REF) == 11  # "o" of "rover"
    assert lab.first_wrong_char("1. cat\n2. riv", NUMBERED_REF) == 13  # a strict prefix: where it ends (7 + 3 + 3)
    assert lab.first_wrong_char("1. cat\n2. river", NUMBERED_REF) == 15  # stopped early: the end of the text
    assert lab.first_wrong_char("1. cat\n3. river", NUMBERED_REF) == 7  # "3. river" read whole departs at once
    assert lab.decision_of_char is decision_of_char and lab.reference_lines is reference_lines
    with pytest.raises(ValueError):
        labels("reverse")
