"""Multi-turn tool rollouts outside the trainer, for evaluating a model on an executable tool task.

`gear_trl.evaluate` generates single turns; a task such as the calculator (`data/calc_tools/`) needs the model's tool
calls executed and their results fed back, turn after turn. `tool_rollouts` does that the way GRPOTrainer's tool loop
does, so that a score here is what the RL trainer's reward would see:

- the prompt is the chat template's rendering of the row's messages with its `tools` and the generation prompt;
- after each assistant turn (generated up to its first eos), the turn is parsed with TRL's `parse_response` (the
  tokenizer's response schema, as `add_response_schema` sets it); its tool calls are run on the rollout's environment
  (an exception becomes `{"error": ...}`, as in TRL) and the tool messages' tokens are appended with TRL's suffix
  trick (`_get_tool_suffix_ids`: render a dummy conversation with and without them, keep the difference), using the
  template GRPOTrainer uses for tool conversations (`trainer_chat_template`);
- a rollout stops when a turn has no tool call, after `max_tool_calling_iterations` tool rounds, or when the tool
  results would push the completion past `max_completion_length` tokens (the results are then dropped), and a turn
  is cut where the completion reaches `max_completion_length`.

Generation is batched (left padding), greedy or plain sampling at a temperature (`top_k=0`, `top_p=1`, GRPO's
defaults); sampling is seeded, so a call is reproducible on one machine.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .envs.base import tool_names


def trainer_chat_template(tokenizer) -> str | None:
    """The chat template GRPOTrainer renders tool conversations with: TRL's prefix-preserving training template when
    the tokenizer's own is not prefix-preserving (Qwen3's is not), else None (the tokenizer's own)."""
    from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

    return None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)


def with_response_schema(tokenizer):
    """The tokenizer, with the response schema TRL's `parse_response` needs (set once, as GRPOTrainer does)."""
    from trl.chat_template_utils import add_response_schema

    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        tokenizer = add_response_schema(tokenizer)
    return tokenizer


def tool_suffix_ids(tokenizer, tool_messages: list[dict], chat_template: str | None) -> list[int]:
    """Token ids of tool messages after an assistant turn, up to the next generation prompt (TRL's method)."""
    dummy = [
        {"role": "user", "content": "dummy"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}],
        },
    ]
    kwargs = {"tokenize": True, "chat_template": chat_template, "return_dict": False}
    prefix = list(tokenizer.apply_chat_template(dummy, add_generation_prompt=False, **kwargs))
    full = list(tokenizer.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, **kwargs))
    eos_positions = [i for i, token in enumerate(prefix) if token == tokenizer.eos_token_id]
    if eos_positions:
        prefix = prefix[: eos_positions[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise ValueError("Unexpected tokenization: the eos-trimmed prefix ids are not a prefix of the full ids.")
    return full[len(prefix) :]


def run_tool_calls(environment: Any, tool_calls: list[dict]) -> list[dict]:
    """Run parsed tool calls (`[{"type": "function", "function": {"name", "arguments"}}]`) on `environment`; one
    `{"role": "tool", "name", "content"}` message each, errors reported as TRL reports them."""
    tools = {name: getattr(environment, name) for name in tool_names(type(environment))}
    messages = []
    for tool_call in tool_calls:
        function = tool_call.get("function", {}) if tool_call.get("type") == "function" else {}
        name = function.get("name", tool_call.get("name", "unknown"))
        try:
            if not function:
                raise ValueError(f"Unsupported tool call type: {tool_call.get('type')}")
            if name not in tools:
                raise ValueError(f"Tool {name} not found.")
            result = tools[name](**function.get("arguments", {}))
        except Exception as exc:  # noqa: BLE001 - reported to the model, as TRL does
            result = {"error": str(exc)}
        messages.append({"role": "tool", "name": name, "content": str(result)})
    return messages


@torch.no_grad()
def _generate(model, tokenizer, sequences: list[list[int]], budgets: list[int], generation_config) -> list[list[int]]:
    """New tokens for each left-padded sequence, cut after the first eos and at its budget."""
    width = max(len(ids) for ids in sequences)
    pad_id = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad_id] * (width - len(ids)) + list(ids) for ids in sequences])
    attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in sequences])
    device = next(model.parameters()).device
    generation_config.max_new_tokens = max(budgets)
    output = model.generate(
        input_ids=input_ids.to(device), attention_mask=attention_mask.to(device), generation_config=generation_config
    )
    new_tokens = []
    for row, budget in zip(output[:, width:].tolist(), budgets, strict=True):
        if tokenizer.eos_token_id in row:
            row = row[: row.index(tokenizer.eos_token_id) + 1]
        new_tokens.append(row[:budget])
    return new_tokens


def tool_rollouts(
    model,
    tokenizer,
    prompts: Sequence[list[dict]],
    tools: Sequence[list[dict] | None],
    environments: Sequence[Any],
    *,
    do_sample: bool,
    temperature: float = 1.0,
    max_completion_length: int = 256,
    max_tool_calling_iterations: int = 4,
    batch_size: int = 64,
    seed: int = 0,
) -> list[list[dict]]:
    """One multi-turn rollout per prompt, as GRPOTrainer's tool loop runs it (see the module docstring).

    Args:
        prompts: conversational prompts (lists of messages).
        tools: per prompt, the tool schemas rendered into it (or None).
        environments: per prompt, an environment already `reset` for its row; its tools (public methods, as TRL
            lists them) run the calls, and it holds the final state afterwards.

    Returns:
        Per prompt, the completion as TRL's reward functions get it: assistant messages (parsed) and tool messages.
    """
    from transformers import GenerationConfig

    tokenizer = with_response_schema(tokenizer)
    from trl.chat_template_utils import parse_response

    chat_template = trainer_chat_template(tokenizer)
    was_training = model.training
    model.eval()
    generation_config = GenerationConfig(
        do_sample=do_sample,
        temperature=temperature if do_sample else None,
        top_k=0 if do_sample else None,
        top_p=1.0 if do_sample else None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    rng_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        render = {
            "add_generation_prompt": True,
            "tokenize": True,
            "return_dict": False,
            "chat_template": chat_template,
        }
        prompt_ids = [
            list(tokenizer.apply_chat_template(prompt, tools=row_tools, **render))
            for prompt, row_tools in zip(prompts, tools, strict=True)
        ]
        completion_ids: list[list[int]] = [[] for _ in prompts]
        completions: list[list[dict]] = [[] for _ in prompts]
        active = list(range(len(prompts)))
        for round_index in range(max_tool_calling_iterations + 1):
            if not active:
                break
            new_ids: dict[int, list[int]] = {i: [] for i in active}
            runnable = [i for i in active if len(completion_ids[i]) < max_completion_length]
            for start in range(0, len(runnable), batch_size):
                chunk = runnable[start : start + batch_size]
                sequences = [prompt_ids[i] + completion_ids[i] for i in chunk]
                budgets = [max_completion_length - len(completion_ids[i]) for i in chunk]
                for i, ids in zip(chunk, _generate(model, tokenizer, sequences, budgets, generation_config)):
                    new_ids[i] = ids
            still_calling = []
            for i in active:
                prefix = prompt_ids[i] + completion_ids[i]
                completion_ids[i] = completion_ids[i] + new_ids[i]
                if not new_ids[i]:
                    continue
                message = parse_response(tokenizer, new_ids[i], prefix=prefix, tools=tools[i])
                completions[i].append(message)
                if not message.get("tool_calls") or round_index == max_tool_calling_iterations:
                    continue
                tool_messages = run_tool_calls(environments[i], message["tool_calls"])
                suffix = tool_suffix_ids(tokenizer, tool_messages, chat_template)
                if len(completion_ids[i]) + len(suffix) > max_completion_length:
                    continue  # TRL drops tool results that would overflow the completion; the rollout ends
                completions[i].extend(tool_messages)
                completion_ids[i] = completion_ids[i] + suffix
                still_calling.append(i)
            active = still_calling
    finally:
        torch.random.set_rng_state(rng_state)
        model.train(was_training)
    return completions


def score_rollouts(
    reward_func: Callable[..., list],
    completions: list[list[dict]],
    environments: Sequence[Any],
    rows: Sequence[dict],
) -> list[float | None]:
    """`reward_func` on the rollouts, called as GRPOTrainer calls it: the row columns and the live environments."""
    columns = {key: [row[key] for row in rows] for key in rows[0] if key not in ("prompt", "completion")}
    accepts = inspect.signature(reward_func).parameters
    kwargs = {"environments": list(environments)} if "environments" in accepts or "kwargs" in accepts else {}
    prompts = [row["prompt"] for row in rows]
    return reward_func(prompts=prompts, completions=completions, **columns, **kwargs)


__all__ = ["run_tool_calls", "score_rollouts", "tool_rollouts", "tool_suffix_ids", "trainer_chat_template"]
