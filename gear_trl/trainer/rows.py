"""Per-row checks of training data, made before training so that a bad row fails the run at once with its index,
not at step 400 when a batch first draws it.

- `check_raw_rows` (before the dataset adapter runs): the JSON columns of tool-use rows parse (`tools`,
  `initial_config`, `involved_classes`, and `ground_truth` under `dataset_format: tool_use`); every tool schema is an
  OpenAI-style function whose parameter types are JSON-schema types.
- `check_prepared_rows` (after it): every prompt has text (unless an environment supplies it); no ground truth is
  longer than `MAX_GROUND_TRUTH_CHARS`.
- `check_prompt_lengths` (with the tokenizer, before the model loads): every prompt, rendered with its tools, leaves
  the completion room in the model's context (`max_position_embeddings - max_completion_length` tokens).

Each raises `PreflightError` naming the first offending rows (index in the split, 0-based) and how many there are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from ..inputs.preflight import PreflightError

MAX_GROUND_TRUTH_CHARS = 100_000
"""Longest ground truth accepted. An answer or a reference call chain is a few hundred characters; one of 100k is a
data error (a whole document in the wrong column) that would also make every teacher prompt of its row huge."""

JSON_SCHEMA_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})
_SHOWN = 5
_JSON_COLUMNS = ("tools", "initial_config", "involved_classes")


def _refuse(where: str, problems: list[tuple[int, str]], total: int) -> None:
    if not problems:
        return
    shown = "; ".join(f"row {index}: {problem}" for index, problem in problems[:_SHOWN])
    more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
    raise PreflightError(
        f"{len(problems)} of {total} rows of {where} cannot be trained on: {shown}{more}. Fix or drop them."
    )


def _parsed(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _types_problem(schema: Any, path: str) -> str | None:
    """The first unknown JSON-schema `type` under `schema` (a parameters object), as `path: 'type'`."""
    if not isinstance(schema, dict):
        return None
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind is not None and kind not in JSON_SCHEMA_TYPES:
            return f"{path} has type {kind!r} (JSON-schema types: {', '.join(sorted(JSON_SCHEMA_TYPES))})"
    for name, sub in (schema.get("properties") or {}).items() if isinstance(schema.get("properties"), dict) else ():
        problem = _types_problem(sub, f"{path}.{name}")
        if problem:
            return problem
    return _types_problem(schema.get("items"), f"{path}[]")


def tools_problem(tools: Any) -> str | None:
    """Why a row's `tools` value (JSON text or a list) is not a list of OpenAI-style function schemas; None if it is."""
    if tools is None or tools == "":
        return None
    try:
        parsed = _parsed(tools)
    except ValueError as err:
        return f"`tools` is not valid JSON ({err})"
    if not isinstance(parsed, list):
        return f"`tools` must be a JSON list of tool schemas, got {type(parsed).__name__}"
    for i, tool in enumerate(parsed):
        function = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return f"`tools`[{i}] is not a function schema with a `name`"
        problem = _types_problem(function.get("parameters"), f"`tools`[{i}] ({function['name']}) parameters")
        if problem:
            return problem
    return None


def check_raw_rows(dataset, where: str, *, ground_truth_is_json: bool) -> None:
    """Refuse rows whose JSON columns (see the module docstring) do not parse or whose tool schemas are malformed."""
    columns = [c for c in _JSON_COLUMNS if c in dataset.column_names]
    if ground_truth_is_json and "ground_truth" in dataset.column_names:
        columns.append("ground_truth")
    if not columns:
        return
    problems = []
    for index, row in enumerate(dataset.select_columns(columns)):
        problem = tools_problem(row["tools"]) if "tools" in row else None
        for column in columns:
            if problem:
                break
            value = row[column]
            if column != "tools" and isinstance(value, str) and value.strip():
                try:
                    json.loads(value)
                except ValueError as err:
                    problem = f"`{column}` is not valid JSON ({err})"
        if problem:
            problems.append((index, problem))
    _refuse(where, problems, len(dataset))


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    texts = []
    for message in prompt or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p.get("text") or "" for p in content if isinstance(p, dict)]
    return "".join(texts)


def check_prepared_rows(dataset, where: str, ground_truth_column: str, empty_prompts_ok: bool = False) -> None:
    """Refuse rows with an empty prompt (unless `empty_prompts_ok`: an environment's `reset` supplies the instruction,
    which `gear_trl.envs.checks.check_environments` checks), or a ground truth longer than `MAX_GROUND_TRUTH_CHARS`."""
    has_truth = ground_truth_column in dataset.column_names
    problems = []
    for index, row in enumerate(dataset):
        if isinstance(row["prompt"], list) and not row["prompt"]:
            problems.append((index, "the prompt has no message (an environment's instruction goes into its last one)"))
            continue
        if not empty_prompts_ok and not _prompt_text(row["prompt"]).strip():
            problems.append(
                (index, "the prompt is empty (with no `environment` whose `reset` could return the instruction)")
            )
            continue
        truth = row[ground_truth_column] if has_truth else None
        if truth is not None and len(str(truth)) > MAX_GROUND_TRUTH_CHARS:
            problems.append(
                (index, f"the ground truth is {len(str(truth))} characters (at most {MAX_GROUND_TRUTH_CHARS})")
            )
    _refuse(where, problems, len(dataset))


def check_prompt_lengths(
    prompts: Iterable[tuple[Any, Any]], count_tokens: Callable[[Any, Any], int], limit: int, where: str, why: str
) -> None:
    """Refuse rows whose prompt is longer than `limit` tokens. `prompts`: (prompt, tools or None) per row;
    `count_tokens(prompt, tools)`: its length rendered as the trainer renders it; `why`: where the limit comes from."""
    problems, total = [], 0
    for index, (prompt, tools) in enumerate(prompts):
        total += 1
        length = count_tokens(prompt, tools)
        if length > limit:
            problems.append((index, f"the prompt is {length} tokens, longer than {limit} ({why})"))
    _refuse(where, problems, total)


def check_prompts_fit(dataset, model_args, training_args, where: str) -> None:
    """`check_prompt_lengths` for a recipe: the model's tokenizer and `max_position_embeddings` (read from its
    files, no weights), `max_completion_length`, each prompt rendered with its row's `tools` (not an environment's).
    A model given as an object, one whose files cannot be read here, or without a known context length, is not
    checked."""
    from transformers import AutoConfig, AutoTokenizer

    name = model_args.model_name_or_path
    if not isinstance(name, str):
        return
    kwargs = {"revision": model_args.model_revision}
    try:
        config = AutoConfig.from_pretrained(name, **kwargs)
        context = getattr(config.get_text_config(decoder=True), "max_position_embeddings", None)
        tokenizer = AutoTokenizer.from_pretrained(name, **kwargs) if context else None
    except Exception:  # noqa: BLE001 - a model these cannot read is reported by the model load itself
        return
    if not context:
        return
    limit = context - training_args.max_completion_length
    template_kwargs = dict(training_args.chat_template_kwargs or {})

    def count_tokens(prompt, tools) -> int:
        # A prompt's tokens are at most its UTF-8 bytes, and the chat template adds a few hundred characters: most
        # rows are cleared without rendering.
        size = len(json.dumps(prompt, ensure_ascii=False).encode()) + 2 * len(json.dumps(tools or []).encode())
        if size + 2000 <= limit:
            return 0
        if isinstance(prompt, str):
            return len(tokenizer(prompt)["input_ids"])
        ids = tokenizer.apply_chat_template(
            prompt, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=True, **template_kwargs
        )["input_ids"]
        return len(ids[0] if ids and isinstance(ids[0], list) else ids)

    has_tools = "tools" in dataset.column_names
    rows = ((row["prompt"], _parsed(row["tools"]) or None if has_tools else None) for row in dataset)
    why = f"max_position_embeddings {context} - max_completion_length {training_args.max_completion_length}"
    check_prompt_lengths(rows, count_tokens, limit, where, why)
