"""Teacher prompts: the ground truth goes into the question side; truncation never drops it."""

from transformers import AutoTokenizer

from gear_trl.teacher.prompts import ELLIPSIS, TeacherPromptBuilder, has_ground_truth, teacher_prompt
from gear_trl.trainer.gear_config import DEFAULT_MATH_TEACHER_TEMPLATE

TEMPLATE = "\nReference: {ground_truth}"


def test_conversational_prompt_gets_ground_truth_in_last_user_message():
    prompt = [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "An answer"},
        {"role": "user", "content": "What is 2+2?"},
    ]
    result = teacher_prompt(prompt, "4", TEMPLATE)
    assert result[-1]["content"] == "What is 2+2?\nReference: 4"
    assert result[:3] == prompt[:3]
    assert prompt[-1]["content"] == "What is 2+2?", "the student's prompt must not be modified"


def test_plain_prompt_gets_ground_truth_appended():
    assert teacher_prompt("Q: 2+2?", "4", TEMPLATE) == "Q: 2+2?\nReference: 4"


def test_default_math_template_renders_boxed_literally():
    text = DEFAULT_MATH_TEACHER_TEMPLATE.format(ground_truth="\\frac{1}{2}")
    assert "\\frac{1}{2}" in text and "\\boxed{}" in text


def test_has_ground_truth():
    assert not has_ground_truth(None) and not has_ground_truth("  ") and not has_ground_truth(float("nan"))
    assert not has_ground_truth([])
    assert has_ground_truth("0") and has_ground_truth(0) and has_ground_truth([{"name": "f"}])


def _builder(max_length=None):
    tokenizer = AutoTokenizer.from_pretrained("data/tiny-qwen3")

    def tokenize(prompt, tools=None):
        return tokenizer.apply_chat_template(
            prompt, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]

    return tokenizer, tokenize, TeacherPromptBuilder(tokenize, tokenizer, TEMPLATE, max_length)


def test_builder_marks_rows_without_ground_truth_and_reuses_the_student_prompt():
    tokenizer, tokenize, builder = _builder()
    prompts = [[{"role": "user", "content": "What is 3+4?"}]] * 2
    result = builder(prompts, ["7", None])
    assert result.has_ground_truth == [True, False]
    assert result.truncated == [False, False]
    assert result.input_ids[1] == tokenize(prompts[1])
    assert "Reference: 7" in tokenizer.decode(result.input_ids[0])


def test_truncation_keeps_ground_truth_and_generation_prompt_and_fits():
    tokenizer, _tokenize, builder = _builder(max_length=60)
    question = " ".join(f"apple{i}" for i in range(80)) + " How many apples?"
    result = builder([[{"role": "user", "content": question}]], ["80"])
    ids = result.input_ids[0]
    text = tokenizer.decode(ids)
    assert result.truncated == [True]
    assert len(ids) <= 60
    assert "Reference: 80" in text and "How many apples?" in text and ELLIPSIS in text
    assert text.endswith("<|im_start|>assistant\n")
    assert "apple0 " not in text  # the start of the question went first


def test_short_prompts_are_not_truncated():
    _, _, builder = _builder(max_length=500)
    result = builder([[{"role": "user", "content": "1+1?"}]], ["2"])
    assert result.truncated == [False]


def test_tool_calls_are_written_as_the_chat_template_writes_them():
    from gear_trl.teacher.prompts import tool_calls_text

    tokenizer = AutoTokenizer.from_pretrained("data/tiny-qwen3")
    calls = [{"name": "cd", "arguments": {"folder": "docs"}}, {"name": "ls", "arguments": {}}]
    text = tool_calls_text(tokenizer, calls)
    assert text.startswith("<tool_call>") and text.endswith("</tool_call>")
    assert text.count("<tool_call>") == 2 and '"folder": "docs"' in text and '"name": "ls"' in text
    assert "<|im_start|>" not in text and "<|im_end|>" not in text


def test_builder_renders_each_rows_tools_into_the_teacher_prompt():
    tokenizer, _tokenize, builder = _builder()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "lookup_weather",
                "description": "Weather",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    prompts = [[{"role": "user", "content": "Weather?"}]] * 2
    result = builder(prompts, ["sunny", "rain"], tools=[tools, None])
    assert "lookup_weather" in tokenizer.decode(result.input_ids[0])
    assert "lookup_weather" not in tokenizer.decode(result.input_ids[1])


def test_repeated_prompts_are_tokenized_once():
    tokenizer, tokenize, _ = _builder()
    calls = []

    def counting(prompt, tools=None):
        calls.append(prompt)
        return tokenize(prompt, tools)

    builder = TeacherPromptBuilder(counting, tokenizer, TEMPLATE)
    prompts = [[{"role": "user", "content": "2+2?"}]] * 4 + [[{"role": "user", "content": "3+3?"}]] * 4
    result = builder(prompts, ["4"] * 4 + ["6"] * 4)
    assert len(calls) == 2
    assert result.input_ids[0] == result.input_ids[3] != result.input_ids[4]


def test_reference_solution_placeholder_falls_back_to_the_answer():
    from gear_trl.teacher.prompts import teacher_hint

    template = "\nAnswer {ground_truth}; solution: {reference_solution}"
    assert teacher_hint(template, "7", "3 + 4 = 7") == "\nAnswer 7; solution: 3 + 4 = 7"
    assert teacher_hint(template, "7", None) == teacher_hint(template, "7", "  ") == "\nAnswer 7; solution: 7"
    assert teacher_prompt("Q?", "7", "\n{reference_solution}", "3 + 4 = 7") == "Q?\n3 + 4 = 7"


def test_builder_shows_solutions_and_flags_rows_that_only_have_the_answer():
    tokenizer, _, _ = _builder()
    builder = TeacherPromptBuilder(_builder()[1], tokenizer, "\nSolution: {reference_solution}")
    prompts = [[{"role": "user", "content": "What is 3+4?"}]] * 3
    result = builder(prompts, ["7", "7", None], solutions=["3 plus 4 is 7", None, "unused"])
    assert result.answer_only == [False, True, False]  # the row without ground truth has no teacher at all
    texts = [tokenizer.decode(ids) for ids in result.input_ids]
    assert "Solution: 3 plus 4 is 7" in texts[0] and "Solution: 7" in texts[1] and "Solution" not in texts[2]
    assert builder(prompts, ["7", "7", None]).answer_only is None  # no solutions asked for


def test_solution_reference_switches_the_default_template_and_needs_the_placeholder():
    import pytest

    from gear_trl import GEARConfig
    from gear_trl.trainer.gear_config import DEFAULT_MATH_SOLUTION_TEMPLATE

    def make(**kwargs):
        return GEARConfig(output_dir="unused", use_cpu=True, bf16=False, report_to="none", **kwargs)

    assert make().teacher_template == DEFAULT_MATH_TEACHER_TEMPLATE and make().teacher_reference == "answer"
    assert make(teacher_reference="solution").teacher_template == DEFAULT_MATH_SOLUTION_TEMPLATE
    assert make(teacher_template="\n{reference_solution}").teacher_template == "\n{reference_solution}"
    with pytest.raises(ValueError, match="teacher_reference: solution"):
        make(teacher_reference="solution", teacher_template="\nReference: {ground_truth}")
    with pytest.raises(ValueError, match="`teacher_reference` must be one of"):
        make(teacher_reference="steps")


def test_the_trainer_is_the_teachers_host():
    """GEARTrainer implements every method of `TeacherHost` (the teacher's few named needs). The teacher's modules'
    old paths are checked with every moved module's in tests/project/test_layers.py (MOVED)."""
    import typing

    from gear_trl import GEARTrainer
    from gear_trl.teacher.teacher import TeacherHost

    needs = [
        name for name in TeacherHost.__dict__ if callable(getattr(TeacherHost, name)) and not name.startswith("_")
    ]
    assert len(needs) <= 10 and "teacher_parts" in needs
    assert [name for name in needs if not callable(getattr(GEARTrainer, name, None))] == []
    assert set(typing.get_type_hints(TeacherHost)) == {"args", "accelerator"}
