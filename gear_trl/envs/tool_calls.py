"""Tool calls read from a completion: Qwen3-style `<tool_call>` blocks in text, or TRL's parsed `tool_calls` of
assistant messages (`parse_tool_calls`). The environments execute them (`bfcl_official`), the rewards check them
(`gear_trl.rewards.tool_call`), so they live here, below both: the rewards import the environments, never the
reverse.
"""

from __future__ import annotations

import json
import re
from typing import Any

ToolCall = dict[str, Any]
"""A parsed call: `{"name": str | None, "arguments": dict}`; `name` is None for a call that could not be parsed."""

_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_THINK_BLOCK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


def column_value(values: Any, index: int) -> Any:
    """The `index`-th value of a reward kwarg column (TRL passes lists; a scalar applies to every sample)."""
    if isinstance(values, (list, tuple)):
        return values[index] if index < len(values) else None
    return values


def _invalid_call() -> ToolCall:
    return {"name": None, "arguments": {}}


def load_json(text: str) -> Any:
    """`text` read as JSON, or None where it is not JSON (or nests too deep)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _call_from_fields(name: Any, arguments: Any) -> ToolCall:
    # Arguments come as a dict (TRL's parsed tool calls) or as a JSON string (OpenAI's wire format); a call without
    # arguments is a call of a function that takes none.
    if arguments is None:
        arguments = {}
    elif isinstance(arguments, str):
        arguments = load_json(arguments) if arguments.strip() else {}
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return _invalid_call()
    return {"name": name, "arguments": arguments}


def parse_text_tool_calls(text: str) -> list[ToolCall]:
    """The calls in Qwen3-style `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` blocks of `text`.

    Blocks inside `<think>...</think>` are reasoning, not calls; an unclosed `<think>` hides the rest of the text, and
    text before a lone `</think>` (the opening tag was in the prompt) is reasoning too. A block whose body is not a
    JSON object with a string `name` and object `arguments` (or an unclosed block) is an invalid call, which matches
    no expected call.
    """
    if "</think>" in text and "<think>" not in text:
        text = text.rsplit("</think>", 1)[1]
    text = _THINK_BLOCK.sub("", text)
    calls = []
    for match in _TOOL_CALL_BLOCK.finditer(text):
        body = load_json(match.group(1).strip())
        if not isinstance(body, dict) or not match.group(0).endswith("</tool_call>"):
            calls.append(_invalid_call())
        else:
            calls.append(_call_from_fields(body.get("name"), body.get("arguments", body.get("parameters"))))
    return calls


def _message_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal-style content parts
        return "".join(
            part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _message_tool_calls(message: dict[str, Any]) -> list[ToolCall]:
    tool_calls = message.get("tool_calls")
    if not tool_calls:
        return parse_text_tool_calls(_message_text(message.get("content")))
    if not isinstance(tool_calls, list):
        return [_invalid_call()]
    calls = []
    for tool_call in tool_calls:
        function = tool_call.get("function", tool_call) if isinstance(tool_call, dict) else None
        if not isinstance(function, dict):
            calls.append(_invalid_call())
        else:
            calls.append(_call_from_fields(function.get("name"), function.get("arguments")))
    return calls


def parse_tool_calls(completion: Any) -> list[ToolCall]:
    """The tool calls of a completion, in order.

    A completion is a string (raw text with `<tool_call>` blocks) or a list of messages (TRL's conversational
    completions). In a message list only assistant messages count: their `tool_calls` (`[{"type": "function",
    "function": {"name", "arguments": dict | JSON string}}]`, already parsed by TRL) when present, their `content`'s
    `<tool_call>` blocks otherwise. Anything else is no calls.
    """
    if isinstance(completion, str):
        return parse_text_tool_calls(completion)
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return []
    calls = []
    for message in completion:
        if isinstance(message, str):
            calls.extend(parse_text_tool_calls(message))
        elif isinstance(message, dict) and message.get("role", "assistant") == "assistant":
            calls.extend(_message_tool_calls(message))
    return calls
