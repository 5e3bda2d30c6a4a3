import subprocess
import sys
from pathlib import Path

import pytest
from datasets import Dataset, DatasetDict, load_dataset

from gear_trl.data import DATASET_ADAPTERS, MATH_PROMPT_TEMPLATE, detect_adapter, get_adapter, prepare_dataset
from gear_trl.data.math_tasks import gsm8k_ground_truth, last_boxed, math_ground_truth
from gear_trl.rewards import accuracy_reward

REPO = Path(__file__).resolve().parents[2]
MATH_DIR = REPO / "data" / "math"
COMMITTED = {
    # directory: (columns, adapter auto-detected from them)
    "gsm8k_style": (["question", "answer"], "gsm8k"),
    "math_style": (["problem", "solution"], "math"),
    "generic": (["prompt", "ground_truth"], "generic"),
}


def test_gsm8k_ground_truth_is_the_number_after_the_marker():
    assert gsm8k_ground_truth("3 * 4 = 12\n12 + 1 = 13\n#### 13") == "13"
    assert gsm8k_ground_truth("Lots of steps.\n####  1,234") == "1234"
    assert gsm8k_ground_truth("#### 5\nfix: #### 7 ") == "7"
    assert gsm8k_ground_truth("#### -2.5") == "-2.5"
    assert gsm8k_ground_truth("no marker here, 42") is None
    assert gsm8k_ground_truth("####   ") is None
    assert gsm8k_ground_truth(None) is None


def test_math_ground_truth_is_the_last_box_with_nested_braces():
    assert math_ground_truth(r"So $x = \boxed{\frac{1}{2}}$.") == r"\frac{1}{2}"
    assert math_ground_truth(r"First \boxed{3}, corrected: \boxed{ x^{2} + \sqrt{2} }") == r"x^{2} + \sqrt{2}"
    assert math_ground_truth(r"\boxed{\boxed{5}}") == r"\boxed{5}"
    assert math_ground_truth(r"\fbox{7}") == "7"
    assert math_ground_truth(r"unclosed \boxed{\frac{1}{2}") is None
    assert math_ground_truth("no box at all") is None
    assert math_ground_truth(r"\boxed{}") is None
    assert last_boxed(r"\boxed{1} and \boxed {2}") == "2"


def test_gsm8k_adapter_row():
    example = get_adapter("gsm8k")({"question": "Ann has 3 pens. How many?", "answer": "She has 3.\n#### 3"})
    assert example == {
        "prompt": [{"role": "user", "content": MATH_PROMPT_TEMPLATE.format(question="Ann has 3 pens. How many?")}],
        "ground_truth": "3",
        "reference_solution": "She has 3.",
    }
    assert "step by step" in example["prompt"][0]["content"] and r"\boxed{}" in example["prompt"][0]["content"]


def test_reference_solutions_where_the_format_has_one():
    from gear_trl.data.math_tasks import gsm8k_solution

    # GSM8K: the answer without its last #### line; the final answer stays the ground truth
    answer = "The pens cost 9 * 5 = 45 dollars.\nThe change is 50 - 45 = 5 dollars.\n#### 5"
    assert gsm8k_solution(answer) == "The pens cost 9 * 5 = 45 dollars.\nThe change is 50 - 45 = 5 dollars."
    assert gsm8k_solution("#### 5") is None and gsm8k_solution("no marker") is None and gsm8k_solution(None) is None
    # MATH: the solution itself; AIME: its `solution` column when present
    math_row = get_adapter("math")({"problem": "p", "solution": r"Add: $1 + 1 = \boxed{2}$."})
    assert (math_row["ground_truth"], math_row["reference_solution"]) == ("2", r"Add: $1 + 1 = \boxed{2}$.")
    aime = get_adapter("aime")
    assert (
        aime({"problem": "p", "answer": "7", "solution": "Since 3 + 4 = 7."})["reference_solution"]
        == "Since 3 + 4 = 7."
    )
    assert aime({"problem": "p", "answer": "7"})["reference_solution"] is None
    # generic rows may carry `reference_solution`; missing or blank is None
    generic = get_adapter("generic")
    row = {"prompt": "2 + 2?", "ground_truth": "4", "reference_solution": " 2 + 2 = 4 "}
    assert generic(row)["reference_solution"] == "2 + 2 = 4"
    assert generic({"prompt": "q", "ground_truth": "4", "reference_solution": "  "})["reference_solution"] is None
    assert generic({"prompt": "q", "ground_truth": "4"})["reference_solution"] is None


def test_generic_adapter_wraps_strings_and_keeps_message_lists():
    generic = get_adapter("generic")
    example = generic({"prompt": "What is 2 + 2?", "ground_truth": 4}, system_prompt="Be brief.")
    assert example["prompt"][0] == {"role": "system", "content": "Be brief."}
    assert example["prompt"][1]["role"] == "user" and example["prompt"][1]["content"].startswith("What is 2 + 2?")
    assert example["ground_truth"] == "4"

    messages = [{"role": "system", "content": "old"}, {"role": "user", "content": "1 + 1?"}]
    assert generic({"prompt": messages, "ground_truth": " 2 "})["prompt"] == messages
    replaced = generic({"prompt": messages, "ground_truth": "2"}, system_prompt="new")["prompt"]
    assert replaced == [{"role": "system", "content": "new"}, {"role": "user", "content": "1 + 1?"}]
    assert generic({"prompt": "q", "ground_truth": ""})["ground_truth"] is None


def test_prepare_dataset_keeps_rows_without_ground_truth_and_names_the_column():
    rows = [
        {"problem": "p1", "solution": r"so \boxed{\frac{1}{2}}"},
        {"problem": "p2", "solution": "the answer is 3, no box"},
    ]
    prepared = prepare_dataset(Dataset.from_list(rows), ground_truth_column="answer_key", prompt_template="{question}")
    assert prepared.column_names == ["prompt", "answer_key", "reference_solution"]
    assert prepared["answer_key"] == [r"\frac{1}{2}", None]
    # the worked solution is kept whole, whether or not its answer could be extracted
    assert prepared["reference_solution"] == [r"so \boxed{\frac{1}{2}}", "the answer is 3, no box"]
    assert prepared[0]["prompt"] == [{"role": "user", "content": "p1"}]


def test_prepare_dataset_auto_picks_by_columns_and_handles_dataset_dicts():
    for name, adapter in DATASET_ADAPTERS.items():
        assert detect_adapter([*adapter.columns, "extra"]).name == name
    splits = DatasetDict({"train": Dataset.from_list([{"question": "q", "answer": "#### 1", "id": 0}])})
    prepared = prepare_dataset(splits)
    assert list(prepared) == ["train"]
    # the columns the adapter read become the prompt and ground truth; the others (`id`) are kept, as TRL keeps them
    assert prepared["train"].column_names == ["id", "prompt", "ground_truth", "reference_solution"]


def test_missing_columns_error_names_expected_and_present_columns():
    with pytest.raises(ValueError) as info:
        prepare_dataset(Dataset.from_list([{"query": "q", "response": "r"}]))
    message = str(info.value)
    for adapter in DATASET_ADAPTERS.values():
        assert adapter.name in message
        assert all(column in message for column in adapter.columns)
    assert "query" in message and "response" in message

    with pytest.raises(ValueError, match="problem"):
        prepare_dataset(Dataset.from_list([{"question": "q", "answer": "#### 1"}]), adapter="math")
    with pytest.raises(ValueError, match="gsm8k"):
        get_adapter("nope")


@pytest.mark.parametrize("directory", sorted(COMMITTED))
def test_committed_dataset_loads_and_every_ground_truth_scores(directory):
    columns, adapter = COMMITTED[directory]
    splits = load_dataset(str(MATH_DIR / directory))
    assert sorted(splits) == ["test", "train"]
    assert (splits["train"].num_rows, splits["test"].num_rows) == (400, 100)
    assert all(split.column_names == columns for split in splits.values())
    assert detect_adapter(columns).name == adapter

    key = columns[0]
    assert not set(splits["train"][key]) & set(splits["test"][key]), "train and test share problems"
    assert max(len(text.split()) for split in splits.values() for text in split[key]) < 40

    for split in prepare_dataset(splits).values():
        truths = split["ground_truth"]
        assert None not in truths
        completions = [f"Let me think step by step... \\boxed{{{truth}}}" for truth in truths]
        assert accuracy_reward(completions, truths) == [1.0] * len(truths)


def test_generator_reproduces_committed_files(tmp_path):
    subprocess.run(
        [sys.executable, str(REPO / "data" / "scripts" / "make_math_data.py"), "--out-dir", str(tmp_path)], check=True
    )
    for directory in COMMITTED:
        for split in ("train", "test"):
            written = (tmp_path / directory / f"{split}.jsonl").read_text()
            assert written == (MATH_DIR / directory / f"{split}.jsonl").read_text(), f"{directory}/{split} differs"


def test_aime_rows_use_their_answer_column_even_with_a_solution():
    # AIME sets (e.g. HuggingFaceH4/aime_2024) carry problem, solution and answer; the answer is the ground truth,
    # whatever the solution's last box says, and integer answers become strings.
    rows = [
        {"problem": "Find the remainder.", "solution": "So it is \\boxed{7}, hmm, \\boxed{207}.", "answer": "207"},
        {"problem": "Find n.", "solution": "n = 33", "answer": 33},
    ]
    assert detect_adapter(list(rows[0])).name == "aime"
    prepared = prepare_dataset(Dataset.from_list(rows[:1]))
    assert prepared[0]["ground_truth"] == "207"
    assert prepared[0]["prompt"][0]["content"] == MATH_PROMPT_TEMPLATE.format(question="Find the remainder.")
    assert get_adapter("aime")(rows[1])["ground_truth"] == "33"
    # MATH rows have no answer column and keep the math adapter.
    assert detect_adapter(["problem", "level", "type", "solution"]).name == "math"
