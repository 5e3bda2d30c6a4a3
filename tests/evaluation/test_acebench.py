"""ACEBench's non-interactive categories: `acebench_accuracy` on hand-worked answers (each rule of ACEBench's checker,
quirks included), never raising on hostile text; the rows in data/acebench; every `acebench_*` preset run end to end
on them; and, where an ACEBench checkout is at hand (`ACEBENCH_DIR`), agreement with ACEBench's own evaluation on
generated answers (bench/acebench_agreement.py) and the sample reproducible from it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from gear_trl.data import acebench as acebench_data
from gear_trl.data.acebench import NON_INTERACTIVE_CATEGORIES, load_acebench
from gear_trl.evaluation.benchmarks import ACEBENCH_PRESETS, get_preset
from gear_trl.evaluation.cli import main
from gear_trl.inputs.errors import UserInputError
from gear_trl.rewards import get_reward_funcs
from gear_trl.rewards.acebench import SPECIAL_PHRASES, acebench_accuracy, by_dialogue, parse_calls, verdict
from tests.utils import StandInModel

REPO = Path(__file__).resolve().parents[2]
TINY = "data/tiny-qwen3"
SAMPLE = "data/acebench"
CHECKOUT = os.environ.get("ACEBENCH_DIR")

# A function document and answers written for these tests (not ACEBench's), in ACEBench's format.
FUNCTIONS = [
    {
        "name": "hotel_book",
        "description": "Book a hotel.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "nights": {"type": "integer"},
                "price": {"type": "float"},
                "breakfast": {"type": "boolean"},
                "guests": {"type": "array", "items": {"type": "string"}},
                "room": {"type": "object", "properties": {"kind": {"type": "string"}, "floor": {"type": "integer"}}},
                "note": {"type": "string"},
            },
            "required": ["city", "nights"],
        },
    },
    {
        "name": "weather_get",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {
        "name": "room_tag",
        "description": "Tag a room.",
        "parameters": {"type": "object", "properties": {"room": {"type": "object"}}, "required": ["room"]},
    },
]
BOOKING = {
    "hotel_book": {
        "city": "New York",
        "nights": 3,
        "price": 99.5,
        "breakfast": True,
        "guests": ["Ann Lee", "Bo"],
        "room": {"kind": "double", "floor": 2},
    }
}
RIGHT = (
    "[hotel_book(city='New York', nights=3, price=99.5, breakfast=True, guests=['Ann Lee', 'Bo'], "
    "room={'kind': 'double', 'floor': 2})]"
)


def _with(old: str, new: str) -> str:
    assert old in RIGHT
    return RIGHT.replace(old, new)


NORMAL_CASES = [
    ("the answer as asked", RIGHT, 1),
    ("JSON literals", _with("True", "true"), 1),
    ("no spaces", "".join(RIGHT.split()), 1),
    ("after reasoning", "<think>Book it.</think>\n" + RIGHT, 1),
    ("as a tuple, no brackets", RIGHT[1:-1] + ",", 1),
    ("as a message list", [{"role": "assistant", "content": RIGHT}], 1),
    ("string case and separators", _with("'New York'", "'new-york'"), 1),
    ("a string holding the expected one (substring)", _with("'New York'", "'New York City'"), 1),
    ("a wrong string", _with("'New York'", "'Boston'"), 0),
    ("a wrong number: never compared", _with("nights=3", "nights=4"), 1),
    ("a number as a string", _with("nights=3", "nights='3'"), 0),
    ("an integer for a float", _with("price=99.5", "price=99"), 1),
    ("a wrong boolean: never compared", _with("True", "False"), 1),
    ("a string for a boolean", _with("True", "'yes'"), 0),
    ("an array reordered", _with("['Ann Lee', 'Bo']", "['Bo', 'Ann Lee']"), 0),
    ("array strings normalized", _with("['Ann Lee', 'Bo']", "['ANN LEE', 'bo']"), 1),
    ("an object member left out", _with("{'kind': 'double', 'floor': 2}", "{'kind': 'double'}"), 0),
    ("an object member holding the expected text", _with("'double'", "'Double Room'"), 1),
    ("an object member wrong", _with("'double'", "'single'"), 0),
    ("an object number holding the expected digits", _with("'floor': 2", "'floor': 12"), 1),
    ("a declared argument not expected", _with("city=", "note='x', city="), 0),
    ("a made-up argument", _with("city=", "zz='x', city="), 0),
    ("a required argument left out", _with("city='New York', ", ""), 0),
    ("an optional expected argument left out", _with("price=99.5, ", ""), 1),
    ("a positional argument (dropped)", _with("city=", "'x', city="), 1),
    ("arithmetic on literals", _with("nights=3", "nights=1+2"), 1),
    ("code where a value goes is never run", _with("nights=3", "nights=__import__('os').getpid()+1"), 0),
    ("another function", "[weather_get(city='New York')]", 0),
    ("a wrong function name", RIGHT.replace("hotel_book", "hotel_booking"), 0),
    ("the call twice", "[" + RIGHT[1:-1] + ", " + RIGHT[1:-1] + "]", 0),
    ("prose around the call", "Sure: " + RIGHT, 0),
    ("a code fence", f"```python\n{RIGHT}\n```", 0),
    ("no call", "I cannot help with that.", 0),
    ("an empty list", "[]", 0),
]


@pytest.mark.parametrize(("what", "answer", "expected"), NORMAL_CASES, ids=[c[0] for c in NORMAL_CASES])
def test_a_normal_answer_scores_as_acebenchs_checker_does(what, answer, expected):
    assert acebench_accuracy([answer], [json.dumps(BOOKING)], [json.dumps(FUNCTIONS)], ["normal_atom_bool"]) == [
        float(expected)
    ]


def test_parallel_calls_pair_by_name_and_count_and_one_call_may_answer_two():
    # ACEBench writes a second call of the same function as `name_1`.
    truth = {"weather_get": {"city": "Paris"}, "weather_get_1": {"city": "Rome"}}
    category = "normal_single_turn_parallel_function"

    def score(answer):
        return verdict(answer, truth, FUNCTIONS, category)[0]

    assert score("[weather_get(city='Paris'), weather_get(city='Rome')]")
    assert score("[weather_get(city='Rome'), weather_get(city='Paris')]")
    assert not score("[weather_get(city='Paris')]")
    assert not score("[weather_get(city='Paris'), weather_get(city='Paris')]")
    assert not score("[weather_get(city='Paris'), weather_get(city='Rome'), weather_get(city='Oslo')]")
    assert score("[weather_get(city='Paris Rome'), weather_get(city='Oslo')]")  # one call satisfies both


def test_spaces_are_removed_before_reading_so_a_spaced_string_in_an_object_array_fails():
    # The whole answer loses its spaces first; objects compare the text of their members, so 'sea view' inside an
    # object's array is 'seaview' there and the expected "['sea view']" is not found: no answer passes, the right one
    # included. A top-level array normalizes its strings, so there the spaces do not matter.
    truth = {"room_tag": {"room": {"tags": ["sea view"]}}}
    for tags in ("['sea view']", "['seaview']", "['Sea View']"):
        assert not verdict(f"[room_tag(room={{'tags': {tags}}})]", truth, FUNCTIONS, "normal_atom_object_deep")[0]
    assert verdict("[room_tag(room={'tags': 'sea view'})]", {"room_tag": {"room": {"tags": "sea view"}}}, FUNCTIONS,
                   "normal_atom_object_deep")[0]  # fmt: skip
    assert parse_calls("[f(a='New York')]") == [{"f": {"a": "NewYork"}}]


def test_ground_truth_alternatives_any_one_suffices():
    truth = [{"weather_get": {"city": "Paris"}}, {"weather_get": {"city": "Rome"}}]
    assert verdict("[weather_get(city='Rome')]", truth, FUNCTIONS, "normal_similar_api") == (True, "")
    assert verdict("[weather_get(city='Oslo')]", truth, FUNCTIONS, "normal_similar_api") == (False, "wrong")


SPECIAL_CASES = [
    ("special_incomplete", {"hotel_book": ["city", "nights"]}, '["Missing necessary parameters (city, nights) for the api (hotel_book)"]', 1),
    ("special_incomplete", {"hotel_book": ["city", "nights"]}, '["Missing necessary parameters (city) for the api (hotel_book)"]', 0),
    ("special_incomplete", {"hotel_book": ["city", "nights"]}, '["Missing necessary parameters (city, nights)"]', 0),
    ("special_incomplete", {"hotel_book": ["city", "nights"]}, '["missing necessary parameters (city, nights) for the api (hotel_book)"]', 0),
    ("special_error_param", {"nights": ["-3"]}, '["There is incorrect value (-3) for the parameters (nights) in the conversation history."]', 1),
    ("special_error_param", {"nights": ["-3"]}, '["There is incorrect value (3) for the parameters (nights) in the conversation history."]', 0),
    ("special_error_param", {"nights": ["-3"]}, '["Missing necessary parameters (nights) for the api (hotel_book)"]', 0),
    ("special_irrelevant", "unused", '["Due to the limitations of the function, I cannot solve this problem."]', 1),
    ("special_irrelevant", "unused", "[weather_get(city='Paris')]", 0),
    ("special_irrelevant", "unused", "[weather_get(city='Paris')] the limitations of the function", 1),  # no call check
    ("special_irrelevant", "unused", "<think>the limitations of the function</think>I cannot.", 0),
]  # fmt: skip


@pytest.mark.parametrize(("category", "truth", "answer", "expected"), SPECIAL_CASES)
def test_a_special_answer_must_name_what_acebench_looks_for(category, truth, answer, expected):
    assert acebench_accuracy([answer], [json.dumps(truth)], [json.dumps(FUNCTIONS)], [category]) == [float(expected)]


HOSTILE = [
    None,
    7,
    {"role": "assistant"},
    [{"role": "assistant", "content": None}, "x", 3],
    "[" * 5000,
    "(" * 300 + ")" * 300,
    "[hotel_book(city=9**9**9**9)]",
    "[hotel_book(city='x'*10**12)]",
    "[hotel_book(city=" + "*".join(["2**60000"] * 50) + ")]",
    "[hotel_book(city=b'x'*10**9)]",
    "[hotel_book(city=1/0)]",
    "[hotel_book(city=-'x')]",
    "[hotel_book(city={[1]: 2})]",
    "[hotel_book(**{'city': 'x'})]",
    "[hotel_book(city=f'{x}')]",
    "[hotel_book(city=lambda: 1)]",
    "[hotel_book(city=x.y)]",
    "\x00\ud800",
]


@pytest.mark.parametrize("answer", HOSTILE, ids=range(len(HOSTILE)))
def test_no_model_output_or_broken_row_makes_the_reward_raise(answer):
    rows = [
        (json.dumps(BOOKING), json.dumps(FUNCTIONS), "normal_atom_bool"),
        ("{not json", "[]", "normal_single_turn_single_function"),
        (json.dumps(BOOKING), json.dumps([{"name": "hotel_book"}]), "normal_atom_list"),  # no `parameters`
        (json.dumps({"hotel_book": [1, 2]}), "[]", "special_incomplete"),
        (json.dumps(["x"]), "null", "special_error_param"),
        (None, "[]", "normal_atom_bool"),
        (json.dumps(BOOKING), "[]", None),
    ]
    for truth, functions, category in rows:
        (value,) = acebench_accuracy([answer], [truth], [functions], [category])
        assert value is None if truth is None or category is None else value in (0.0, 1.0)


def test_the_reward_is_registered_and_reads_messages():
    (reward,) = get_reward_funcs(["acebench_accuracy"])
    messages = [{"role": "assistant", "content": RIGHT}]
    assert reward([messages], ground_truth=[json.dumps(BOOKING)], functions=[json.dumps(FUNCTIONS)],
                  category=["normal_atom_enum"]) == [1.0]  # fmt: skip


def test_by_dialogue_counts_a_dialogue_correct_only_when_every_turn_is():
    def sample(i, value):
        return {"index": i, "sample": 0, "rewards": {"acebench_accuracy": value}}

    report = {"num_samples": 1, "accuracy": 0.75, "avg@1": 0.75, "rewards": {"acebench_accuracy": 0.75},
              "per_sample": [sample(0, 1.0), sample(1, 0.0), sample(2, 1.0), sample(3, 1.0)]}  # fmt: skip
    report = by_dialogue(report, ["d0", "d0", "d1", "d1"])
    assert report["accuracy"] == report["avg@1"] == 0.5 and report["turn_accuracy"] == 0.75
    assert report["process_accuracy"] == 0.75 and report["dialogues"] == 2


# --- rows -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("category", NON_INTERACTIVE_CATEGORIES)
def test_the_local_sample_holds_every_category_with_acebenchs_prompts(category):
    rows = list(load_acebench(SAMPLE, category))
    assert len(rows) == 3 and {row["category"] for row in rows} == {category}
    for row in rows:
        system, user = row["prompt"]
        assert (system["role"], user["role"]) == ("system", "user")
        assert user["content"].startswith("Conversation history 1..t:")
        for function in json.loads(row["functions"]):  # the functions are shown to the model
            assert repr(function["name"]) in system["content"]
        if category.startswith("special"):  # the prompt asks for the phrases the checker looks for
            assert all(phrase in system["content"] for phrase in SPECIAL_PHRASES.values())
        else:
            assert "[ApiName(key1='value1', key2='value2', ...)]" in system["content"]
    assert len(list(load_acebench(SAMPLE, category, limit=2))) == 2


def test_missing_acebench_data_is_named_with_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(UserInputError, match="neither an ACEBench checkout"):
        load_acebench(str(tmp_path), "normal_atom_bool")
    with pytest.raises(UserInputError, match="non-interactive"):
        load_acebench(SAMPLE, "agent_multi_turn")

    def offline(url, timeout=None):
        raise OSError("network is unreachable")

    monkeypatch.setattr(acebench_data.urllib.request, "urlopen", offline)
    with pytest.raises(
        UserInputError, match=r"not on the Hugging Face Hub.*gear_trl.data.acebench.*github.com/ACEBench"
    ):
        acebench_data.download(cache_dir=str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with pytest.raises(UserInputError, match="--dataset /path/to/ACEBench"):
        load_acebench(get_preset("acebench_atom_bool").dataset, "normal_atom_bool")


# --- presets end to end ---------------------------------------------------------------------------------------------


class Oracle(StandInModel):
    """A stand-in model: finds which sample row a prompt holds (by its user message) and answers `answers[id]`."""

    def __init__(self, tokenizer, rows, answers):
        self.tokenizer, self.rows, self.answers = tokenizer, rows, answers
        self.seen = []

    def generate(self, input_ids, attention_mask, generation_config):
        self.seen.append(generation_config)
        out = []
        for ids in input_ids.tolist():
            prompt = self.tokenizer.decode(ids, skip_special_tokens=True)
            # A later turn's history holds the earlier turns' messages: the longest user message found is the row's.
            held = [row for row in self.rows if row["prompt"][-1]["content"].strip() in prompt]
            row = max(held, key=lambda row: len(row["prompt"][-1]["content"]))
            answer = self.tokenizer(self.answers[row["id"]])["input_ids"] + [self.tokenizer.eos_token_id]
            out += [ids + answer] * generation_config.num_return_sequences
        width = max(map(len, out))
        return torch.tensor([row + [self.tokenizer.eos_token_id] * (width - len(row)) for row in out])


def _reference_answer(row: dict) -> str:
    """The answer ACEBench's prompt asks for, written from the row's ground truth."""
    truth, category = json.loads(row["ground_truth"]), row["category"]
    if category == "special_irrelevant":
        return truth
    if category == "special_incomplete":
        ((name, missing),) = truth.items()
        return f'["Missing necessary parameters ({",".join(missing)}) for the api ({name})"]'
    if category == "special_error_param":
        ((name, values),) = truth.items()
        return f'["There is incorrect value ({", ".join(values)}) for the parameters ({name}) in the conversation history."]'
    truth = truth[0] if isinstance(truth, list) else truth

    def call(name, arguments):
        return re.sub(r"_\d+$", "", name) + "(" + ", ".join(f"{k}={v!r}" for k, v in arguments.items()) + ")"

    return "[" + ", ".join(call(name, arguments) for name, arguments in truth.items()) + "]"


# The one sample row whose reference answer ACEBench's checker fails (and so does ours): its object holds an array
# of strings with spaces ("time savings"), which removing the answer's spaces breaks (see the test above).
ACEBENCH_FAILS_REFERENCE = {"normal_atom_object_deep_0"}


def _run(tmp_path, monkeypatch, name, answer_of):
    preset = get_preset(name)
    rows = [json.loads(line) for line in (REPO / SAMPLE / f"{preset.split}.jsonl").read_text().splitlines()]
    tokenizer = AutoTokenizer.from_pretrained(TINY)
    oracle = Oracle(tokenizer, rows, {row["id"]: answer_of(row) for row in rows})
    monkeypatch.setattr("gear_trl.evaluation.cli.load_model", lambda *a, **k: (oracle, tokenizer))
    output = tmp_path / f"{name}.json"
    main(["--model", TINY, "--benchmark", name, "--dataset", SAMPLE, "--output", str(output), "--no_progress"])
    return json.loads(output.read_text()), oracle, rows


def test_one_preset_for_each_non_interactive_category_and_the_help_lists_them():
    assert sorted(ACEBENCH_PRESETS.values()) == sorted(NON_INTERACTIVE_CATEGORIES)
    from gear_trl.evaluation.cli import make_parser

    help_text = make_parser().format_help()
    assert all(f"  {name} " in help_text for name in ACEBENCH_PRESETS)


@pytest.mark.parametrize("name", list(ACEBENCH_PRESETS))
def test_every_acebench_preset_runs_on_the_local_rows_and_scores_the_reference_answers(tmp_path, monkeypatch, name):
    preset = get_preset(name)
    report, oracle, rows = _run(tmp_path, monkeypatch, name, _reference_answer)
    config = report["config"]
    assert (config["split"], config["dataset_format"], config["reward"]) == (
        preset.split,
        "acebench",
        ["acebench_accuracy"],
    )
    assert (config["temperature"], config["max_new_tokens"]) == (0.0, 4096) and not oracle.seen[0].do_sample
    passed = [s["rewards"]["acebench_accuracy"] for s in report["per_sample"]]
    assert passed == [float(row["id"] not in ACEBENCH_FAILS_REFERENCE) for row in rows]
    if preset.split.startswith("normal_multi_turn"):  # 3 rows: two turns of dialogue 0, the first of dialogue 1
        assert report["dialogues"] == 2 and report["accuracy"] == 1.0

    report, _, _ = _run(tmp_path, monkeypatch, name, lambda row: "I cannot help with that.")
    assert report["accuracy"] == 0.0 and report["n"] == 3


def test_a_wrong_turn_fails_its_whole_dialogue(tmp_path, monkeypatch):
    def answer(row):
        return "[]" if row["id"] == "normal_multi_turn_user_adjust_0_1" else _reference_answer(row)

    report, _, _ = _run(tmp_path, monkeypatch, "acebench_multi_adjust", answer)
    assert report["turn_accuracy"] == pytest.approx(2 / 3)
    assert report["accuracy"] == 0.5 and report["process_accuracy"] == 0.75


# --- against ACEBench's own checker (needs a checkout) ---------------------------------------------------------------

needs_checkout = pytest.mark.skipif(
    not (CHECKOUT and acebench_data.is_checkout(CHECKOUT)),
    reason="set ACEBENCH_DIR to a checkout of github.com/ACEBench/ACEBench",
)


@needs_checkout
@pytest.mark.parametrize("category", NON_INTERACTIVE_CATEGORIES)
def test_the_sample_is_what_the_script_makes_from_the_checkout(category):
    made = acebench_data.convert_category(CHECKOUT, category, limit=3)
    assert made == list(load_acebench(SAMPLE, category)) == list(load_acebench(CHECKOUT, category, limit=3))


@needs_checkout
def test_the_presets_download_acebenchs_files_at_the_pinned_commit_once(tmp_path, monkeypatch):
    fetched = []

    def from_checkout(url, timeout=None):  # GitHub's raw files, served from the checkout
        prefix = f"https://raw.githubusercontent.com/ACEBench/ACEBench/{acebench_data.ACEBENCH_COMMIT}/"
        assert url.startswith(prefix)
        fetched.append(url)
        return open(os.path.join(CHECKOUT, url[len(prefix) :]), "rb")

    monkeypatch.setattr(acebench_data.urllib.request, "urlopen", from_checkout)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = get_preset("acebench_parallel").dataset
    rows = list(load_acebench(source, "normal_single_turn_parallel_function", limit=3))
    assert rows == list(load_acebench(SAMPLE, "normal_single_turn_parallel_function"))
    assert len(fetched) == 1 + 2 * len(NON_INTERACTIVE_CATEGORIES)
    load_acebench(source, "special_irrelevant")
    assert len(fetched) == 1 + 2 * len(NON_INTERACTIVE_CATEGORIES)  # cached
