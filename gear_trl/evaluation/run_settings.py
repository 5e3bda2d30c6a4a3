"""The generation settings a training run used, recorded in its output folder so that evaluation renders prompts the
same way.

A Qwen3 trained with `chat_template_kwargs: {enable_thinking: false}` and scored with the template's default
(thinking on) is scored on prompts it never saw. `gear_trl.train` writes `RUN_SETTINGS` (JSON) into `output_dir` before
training starts, so the final model, a LoRA adapter saved there and every `checkpoint-N` below it share it;
`gear_trl.evaluate` reads it from the model's folder (or, for a checkpoint, the folder above) and its own flags
override it key by key. Transformers' `training_args.bin` holds the same values but is a pickle: loading one runs
code from the folder, so evaluation does not read it.
"""

from __future__ import annotations

import json
import os
from typing import Any

RUN_SETTINGS = "gear_run_settings.json"
"""The file name, in a run's `output_dir`."""


def run_settings(training_args: Any, script_args: Any = None) -> dict[str, Any]:
    """The settings to record: the chat-template arguments, the system prompt and the prompt template the prompts were
    rendered with, and the completion and tool-round limits rollouts had (for reference; evaluation's own flags set
    those)."""
    return {
        "chat_template_kwargs": dict(getattr(training_args, "chat_template_kwargs", None) or {}),
        "system_prompt": getattr(script_args, "system_prompt", None),
        "prompt_template": getattr(script_args, "prompt_template", None),
        "max_completion_length": getattr(training_args, "max_completion_length", None),
        "max_tool_calling_iterations": getattr(training_args, "max_tool_calling_iterations", None),
    }


def write_run_settings(output_dir: str, training_args: Any, script_args: Any = None) -> str:
    """Write `run_settings(...)` to `output_dir/RUN_SETTINGS`; returns the path."""
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, RUN_SETTINGS)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(run_settings(training_args, script_args), handle, indent=2, default=str)
    return path


def read_run_settings(model: str) -> tuple[dict[str, Any], str | None]:
    """(settings, path read) for a model folder: its own `RUN_SETTINGS`, else its parent's when it is a
    `checkpoint-N` folder; ({}, None) for a Hub id or a folder without one. A file that is not a JSON object is
    refused (UserInputError naming it) rather than silently ignored."""
    from ..inputs.errors import UserInputError

    if not os.path.isdir(model):
        return {}, None
    folder = os.path.abspath(model)
    candidates = [folder]
    if os.path.basename(folder).startswith("checkpoint-"):
        candidates.append(os.path.dirname(folder))
    for candidate in candidates:
        path = os.path.join(candidate, RUN_SETTINGS)
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as handle:
                    settings = json.load(handle)
            except (OSError, ValueError) as err:
                raise UserInputError(f"{path} cannot be read as JSON ({err}); fix or delete it.") from err
            if not isinstance(settings, dict) or not isinstance(settings.get("chat_template_kwargs", {}), dict):
                raise UserInputError(f"{path} must hold a JSON object with a `chat_template_kwargs` object.")
            return settings, path
    return {}, None


THINKING, NON_THINKING = "thinking", "non-thinking"
"""The chat modes a report records (`chat_mode`)."""


def chat_mode(tokenizer, chat_template_kwargs: dict | None) -> str | None:
    """The mode `chat_template_kwargs` put a chat template in: THINKING or NON_THINKING, told by rendering a probe
    message as `enable_thinking` true and false render it (Qwen3's switch; its default is thinking); None for a
    template without that switch (both render alike) or a tokenizer without a chat template."""
    probe = [{"role": "user", "content": "ping"}]
    kwargs = dict(chat_template_kwargs or {})

    def render(**extra) -> str:
        return tokenizer.apply_chat_template(probe, add_generation_prompt=True, tokenize=False, **{**kwargs, **extra})

    try:
        on, off, used = render(enable_thinking=True), render(enable_thinking=False), render()
    except Exception:  # noqa: BLE001 - no chat template (plain-text prompts): no mode to record
        return None
    if on == off:
        return None
    return NON_THINKING if used == off else THINKING if used == on else None
