"""`teacher_environment_feedback`: the environment's last message in a multi-turn rollout, appended to its teacher's
hint."""

from __future__ import annotations

from transformers import AutoTokenizer

from gear_trl.teacher.prompts import MAX_FEEDBACK_CHARS, TeacherPromptBuilder, final_observation
from tests.utils import TINY


def test_final_observation_is_the_last_tool_message():
    rollout = [
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "content": "first"},
        {"role": "assistant", "content": "again"},
        {"role": "tool", "content": " Error: division by zero "},
        {"role": "assistant", "content": "done"},
    ]
    assert final_observation(rollout) == "Error: division by zero"
    assert final_observation([{"role": "assistant", "content": "no tools"}]) is None
    assert final_observation("plain text") is None
    assert final_observation([{"role": "tool", "content": [{"type": "text", "text": "parts"}]}]) == "parts"
    long = final_observation([{"role": "tool", "content": "x" * 5000 + "END"}])
    assert long.endswith("END") and len(long) == MAX_FEEDBACK_CHARS + 1  # the tail, after an ellipsis


def test_feedback_goes_into_the_hint_of_rows_with_a_reference_only():
    tokenizer = AutoTokenizer.from_pretrained(TINY)

    def tokenize(prompt, tools=None):
        return tokenizer.apply_chat_template(prompt, tokenize=True, add_generation_prompt=True, return_dict=False)

    builder = TeacherPromptBuilder(tokenize, tokenizer, "\nAnswer: {ground_truth}")
    prompt = [{"role": "user", "content": "What is 2 + 2?"}]
    built = builder([prompt, prompt, prompt], ["4", "4", None], feedbacks=["state {x: 1}", None, "ignored"])
    with_feedback, without, no_truth = (tokenizer.decode(ids) for ids in built.input_ids)
    assert "Answer: 4" in with_feedback and "last message in this attempt:\nstate {x: 1}" in with_feedback
    assert "Answer: 4" in without and "last message" not in without
    assert "last message" not in no_truth and built.has_ground_truth == [True, True, False]
    assert built.input_ids[2] == tokenize(prompt)  # no reference: the student's prompt, weights 1
    # a successful sibling is the reference of a sibling row (Teacher.sibling_references): it gets the feedback too,
    # as the option's help says
    sibling = builder([prompt], ["\\boxed{4}"], feedbacks=["Error: no such file"])
    assert "last message in this attempt:\nError: no such file" in tokenizer.decode(sibling.input_ids[0])
    from gear_trl.trainer.gear_config import GEARConfig

    help_text = GEARConfig.__dataclass_fields__["teacher_environment_feedback"].metadata["help"]
    assert "a successful sibling" in help_text and "shown neither keeps the student's prompt" in help_text
