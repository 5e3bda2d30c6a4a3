"""Conversation loops stepped here, one `generator.generate` call per step: BFCL's multi-turn tasks scored by its own
checker (`evaluate_bfcl_multi_turn`) and conversations with a simulated user in an environment
(`evaluate_interactive`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from ..inputs.errors import UserInputError
from .generation import _row_tools, prompt_ids
from .pass_at_k import _mean, _pass_ks
from .scoring import _report, _reward_names, _sample, score


def _fitting(conversations: list, prompts: list, max_prompt_tokens: int | None) -> tuple[list, list, list]:
    """(the conversations whose prompt fits `max_prompt_tokens`, their prompts, the others): a conversation that has
    outgrown the context ends there instead of crashing the run."""
    if max_prompt_tokens is None:
        return conversations, prompts, []
    fits = [len(ids) <= max_prompt_tokens for ids in prompts]
    kept = [(c, ids) for c, ids, fit in zip(conversations, prompts, fits, strict=True) if fit]
    return [c for c, _ in kept], [ids for _, ids in kept], [c for c, fit in zip(conversations, fits) if not fit]


def _assistant_step(text: str) -> tuple[dict, list[dict]]:
    """The assistant message of one generated step and the tool calls its text holds (as the model wrote them, for
    the environment to answer, each with an error text where it is malformed); the message lists the well-formed
    ones as `tool_calls`, so the chat template renders them in the history."""
    from ..envs.tool_calls import parse_text_tool_calls

    calls = parse_text_tool_calls(text)
    message = {"role": "assistant", "content": _without_calls(text) if calls else text}
    if calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": c.get("name"), "arguments": c.get("arguments")}}
            for c in calls
            if isinstance(c.get("name"), str) and isinstance(c.get("arguments"), dict)
        ]
    return message, calls


def _without_calls(text: str) -> str:
    return re.sub(r"<tool_call>.*?(</tool_call>|$)", "", text, flags=re.DOTALL).strip()


def evaluate_bfcl_multi_turn(
    generator,
    tokenizer,
    tasks: list[dict],
    *,
    num_samples: int = 1,
    chat_template_kwargs: dict | None = None,
    max_steps_per_turn: int | None = None,
    max_prompt_tokens: int | None = None,
    progress: bool = True,
    pass_ks: Sequence[int] | None = None,
    user_simulator=None,
) -> dict:
    """BFCL multi-turn tasks rolled out as BFCL's inference does and scored by its own checker.

    Every task (`gear_trl.envs.bfcl_official.load_tasks`) runs `num_samples` separate conversations. Each user turn
    is added, then the model is stepped: each step's `<tool_call>` blocks are executed in the task's official
    instances and their results appended as tool messages, until a step makes no call; more than
    `max_steps_per_turn` steps (BFCL's 20) force-terminate the conversation: no later turn runs, so the checker
    fails it (as BFCL's runner fails a rollout with fewer turns than the task). The prompt shows
    the tools of the turn (BFCL's docs without excluded and not-yet-added functions). The calls of every step go to
    BFCL's `multi_turn_checker` (`check_task`): 1.0 when every turn passes its state and response checks.
    All active conversations step together, one `generator.generate` call per step. A conversation whose prompt
    grows past `max_prompt_tokens` (the model's context less the completion budget) is ended there instead of
    overflowing the model, and counted in `context_overflow`; it fails like a force-terminated one.

    `user_simulator` (`gear_trl.evaluation.user_sim`) writes the user turns; the default, `BFCLScriptedUser`, replays the
    task's own, as BFCL does. Another is asked for turn `t` with the conversation so far and the task as the row,
    never for more turns than the task's ground truth has (the checker scores those); one that stops early leaves
    the checker too few turns, one that raises or answers junk ends the task there, counted in
    `user_simulator_failures`.

    Returns the report of `evaluate` (`accuracy` the fraction of tasks passed over every sample; per sample the
    `completion` is the conversation and `rewards` `{"bfcl_multi_turn": 0 or 1}`, plus `checker`, the verdict's
    error type) and `tool_calls`, the mean number of calls per conversation.
    """
    from tqdm.auto import tqdm

    from ..envs.bfcl_official import (
        MAX_STEPS_PER_TURN,
        TaskState,
        call_string,
        check_task,
        involved_functions,
        task_tools,
    )
    from .user_sim import ask

    _pass_ks(pass_ks, num_samples)
    simulator = BFCLScriptedUser() if user_simulator is None else user_simulator
    limit = MAX_STEPS_PER_TURN if max_steps_per_turn is None else max_steps_per_turn
    conversations = []
    for i, task in enumerate(tasks):
        for j in range(num_samples):
            state = TaskState(task["initial_config"], task["involved_classes"], "long_context" in task["category"])
            allowed = set(involved_functions(task))
            conversations.append({"i": i, "j": j, "task": task, "state": state, "allowed": allowed, "messages": [],
                                  "calls": [], "terminated": False, "n_calls": 0})  # fmt: skip
    bar = tqdm(total=len(conversations), desc="BFCL tasks", unit="rollout", disable=not progress)
    for turn in range(max((len(task["ground_truth"]) for task in tasks), default=0)):
        asked = [c for c in conversations if turn < len(c["task"]["ground_truth"]) and not c["terminated"]]
        answers = ask(simulator, [(list(c["messages"]), c["task"], turn) for c in asked])
        active = []
        for conversation, (messages, error) in zip(asked, answers, strict=True):
            if messages is None:  # the user stopped, or failed: no later turn runs
                conversation["terminated"] = True
                conversation["user_error"] = error
                continue
            conversation["messages"] += messages
            conversation["tools"] = task_tools(conversation["task"], turn)
            active.append(conversation)
        for conversation in active:
            conversation["calls"].append([])
            conversation["steps"] = 0
        stepping = list(active)
        while stepping:
            prompts = [
                prompt_ids(tokenizer, {"prompt": c["messages"], "tools": c["tools"]}, chat_template_kwargs)
                for c in stepping
            ]
            stepping, prompts, overflowing = _fitting(stepping, prompts, max_prompt_tokens)
            for conversation in overflowing:
                conversation["terminated"] = conversation["overflow"] = True
            if not stepping:
                break
            outputs = generator.generate(prompts, 1)
            still = []
            for conversation, samples in zip(stepping, outputs, strict=True):
                _, text, _ = samples[0]
                message, calls = _assistant_step(text)
                conversation["messages"].append(message)
                if not calls:
                    continue
                strings = []
                for call in calls:
                    result = conversation["state"].execute(call.get("name"), call.get("arguments"))
                    conversation["messages"].append({"role": "tool", "name": str(call.get("name")), "content": result})
                    string = call_string(call.get("name"), call.get("arguments"), conversation["allowed"])
                    if string is not None:
                        strings.append(string)
                conversation["n_calls"] += len(calls)
                if strings:
                    conversation["calls"][-1].append(strings)
                conversation["steps"] += 1
                if conversation["steps"] > limit:  # BFCL's force quit: the task fails
                    conversation["terminated"] = True
                else:
                    still.append(conversation)
            stepping = still
    per_sample = []
    for conversation in conversations:
        task = conversation["task"]
        value, verdict = check_task(task, conversation["calls"])  # terminated before the last turn: too few turns
        bar.update(1)
        per_sample.append(
            {
                "index": conversation["i"],
                "sample": conversation["j"],
                "id": task["id"],
                "prompt": task["turns"],
                "completion": conversation["messages"],
                "ground_truth": task["ground_truth"],
                "reward": value,
                "rewards": {"bfcl_multi_turn": value},
                "finished": not conversation["terminated"],
                "checker": verdict.get("error_type"),
                **({"user_simulator_error": conversation["user_error"]} if conversation.get("user_error") else {}),
            }
        )
    bar.close()
    tool_calls = _mean(c["n_calls"] for c in conversations)
    overflow = sum(bool(c.get("overflow")) for c in conversations)
    failures = sum(bool(c.get("user_error")) for c in conversations)
    extra = {"user_simulator_failures": failures} if user_simulator is not None else {}
    return _report(len(tasks), num_samples, ["bfcl_multi_turn"], per_sample, pass_ks, tool_calls=tool_calls,
                   context_overflow=overflow, **extra, skipped_multi_turn=0)  # fmt: skip


class BFCLScriptedUser:
    """BFCL's own user turns, as its inference replays them (`turn_messages`): the default user of
    `evaluate_bfcl_multi_turn`."""

    def next_turn(self, messages: list[dict], task: dict, turn: int):
        from ..envs.bfcl_official import turn_messages

        return turn_messages(task, turn) if turn < len(task["turns"]) else None


def _environment_tools(environment) -> dict[str, Callable]:
    """The tools of an environment instance as TRL's `environment_factory` lists them: its public functions but
    `reset` and `get_reward` (plus `state_key`, which GEARTrainer hides), bound to the instance."""
    import inspect

    return {
        name: getattr(environment, name)
        for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward", "state_key") and not name.startswith("_")
    }


def _call_tool(tools: dict[str, Callable], name, arguments) -> str:
    """A tool's result as text; an unknown tool or any exception is an error text (what a model writes is
    untrusted), as TRL's tool loop answers them."""
    try:
        if name not in tools:
            raise ValueError(f"Tool {name} not found.")
        result = tools[name](**arguments)
    except Exception as err:  # noqa: BLE001 - reported to the model, never raised
        return json.dumps({"error": str(err)})
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


def _is_user_text(message) -> bool:
    return isinstance(message, dict) and message.get("role") == "user" and bool(str(message.get("content") or ""))


def evaluate_interactive(
    generator,
    tokenizer,
    dataset,
    reward_funcs: Sequence[Callable],
    environment_factory: Callable,
    user_simulator,
    *,
    num_samples: int = 1,
    max_user_turns: int | None = None,
    max_steps_per_turn: int = 20,
    chat_template_kwargs: dict | None = None,
    max_prompt_tokens: int | None = None,
    ground_truth_column: str = "ground_truth",
    progress: bool = True,
    reward_names: Sequence[str] | None = None,
    pass_ks: Sequence[int] | None = None,
) -> dict:
    """Conversations with a simulated user: the agent's tools run in an environment, the user's later turns come
    from `user_simulator` (`gear_trl.evaluation.user_sim`), and the rewards score each whole conversation.

    Each row is played `num_samples` times, each play with its own environment (`environment_factory()`, then
    `reset(**row)` as TRL calls it; a string it returns is appended to the prompt's last message, as TRL does). The
    row's prompt is the first user turn; a prompt without a user message (only the agent's system prompt) has the
    simulator write the first turn too (`turn` 0), as ACEBench's user opens its dialogues. The agent is stepped as `evaluate_bfcl_multi_turn` steps it: each step's
    `<tool_call>` blocks run as the environment's methods (an unknown tool or an exception is answered with an error
    text), and a step without a call ends the agent's turn; then the simulator is asked for the next user turn, which
    is appended, until it answers None (or `STOP`), the conversation holds `max_user_turns` user turns
    (`user_turn_cap`), a turn runs more than `max_steps_per_turn` steps (20, BFCL's limit; the episode is force-ended,
    `finished` false) or the prompt outgrows `max_prompt_tokens` (`context_overflow`). A simulator that raises or
    answers something that is not a user message ends that episode (`user_simulator_failures`, the error in the
    sample's `user_simulator_error`), which is then scored as it stands. All conversations step together: one
    `generator.generate` call per step, one simulator call (`next_turns`, batched when the simulator has it) per step
    for the conversations whose agent turn ended.

    The rewards are called as TRL calls them, on the conversation after the prompt (the agent's messages, tool
    results and the later user turns) with `environments` (each play's environment, in its final state) and every
    column of the row; an environment with `get_reward()` adds it as a reward named after its class, as TRL does.

    Everything runs in this one process: the simulator is asked here, the generator may spread the agent's prompts
    over vLLM engines (data parallel), and nothing is split across ranks.

    Returns the report of `evaluate` plus `tool_calls` (mean tool results per conversation), `user_turns` (mean user
    turns, the prompt's included), `user_simulator_failures`, `user_turn_cap` and `context_overflow` (counts); each
    sample adds `user_turns` and `ended_by` (`user`, `cap`, `user_simulator_error`, `step_limit`,
    `context_overflow`).
    """
    from tqdm.auto import tqdm

    from .user_sim import DEFAULT_MAX_USER_TURNS

    _pass_ks(pass_ks, num_samples)
    cap = DEFAULT_MAX_USER_TURNS if max_user_turns is None else max_user_turns
    if cap < 1:
        raise UserInputError(f"`max_user_turns` must be at least 1, got {cap}.")
    rows = [dict(row) for row in dataset]
    if not rows:
        raise UserInputError("The evaluation split is empty: choose another with --split.")
    names = _reward_names(reward_funcs, reward_names)
    conversations = _start_conversations(rows, num_samples, environment_factory)
    bar = tqdm(total=len(conversations), desc="Conversations", unit="rollout", disable=not progress)
    _open_conversations(conversations, user_simulator)
    stepping = [c for c in conversations if c["ended_by"] is None]
    bar.update(len(conversations) - len(stepping))
    while stepping:
        stepped = len(stepping)
        stepping = _step_conversations(
            stepping, generator, tokenizer, user_simulator, cap, max_steps_per_turn, chat_template_kwargs,
            max_prompt_tokens,
        )  # fmt: skip
        bar.update(stepped - len(stepping))
    bar.close()
    return _conversation_report(conversations, rows, reward_funcs, names, num_samples, ground_truth_column, pass_ks)


def _start_conversations(rows: list[dict], num_samples: int, environment_factory: Callable) -> list[dict]:
    """`num_samples` conversations per row, each with its own environment (`reset(**row)` as TRL calls it; a string it
    returns is appended to the prompt's last message) and the tool schemas the prompt shows."""
    from transformers.utils import get_json_schema

    conversations = []
    for i, row in enumerate(rows):
        for j in range(num_samples):
            environment = environment_factory()
            observation = environment.reset(**row)
            prompt = row["prompt"]
            prompt = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
            if isinstance(observation, str) and prompt and isinstance(prompt[-1].get("content"), str):
                prompt[-1]["content"] += observation
            tools = _environment_tools(environment)
            schemas = _row_tools(row) or [get_json_schema(tool) for tool in tools.values()] or None
            conversations.append({"i": i, "j": j, "row": row, "environment": environment, "tools": tools,
                                  "schemas": schemas, "prompt": prompt, "messages": list(prompt), "ids": [],
                                  "user_turns": 1, "steps": 0, "n_calls": 0, "ended_by": None})  # fmt: skip
    return conversations


def _open_conversations(conversations: list[dict], user_simulator) -> None:
    """A prompt without a user message (only the agent's system prompt): the simulated user opens, as ACEBench's
    does."""
    from .user_sim import ask

    openers = [c for c in conversations if not any(_is_user_text(m) for m in c["prompt"])]
    answers = ask(user_simulator, [(list(c["messages"]), c["row"], 0) for c in openers])
    for conversation, (messages, error) in zip(openers, answers, strict=True):
        conversation["user_turns"] = 0
        if error is not None:
            conversation["ended_by"], conversation["user_error"] = "user_simulator_error", error
        elif messages is None:
            conversation["ended_by"] = "user"
        else:
            conversation["messages"] += messages
            conversation["user_turns"] = 1


def _step_conversations(
    stepping: list[dict],
    generator,
    tokenizer,
    user_simulator,
    cap: int,
    max_steps_per_turn: int,
    chat_template_kwargs: dict | None,
    max_prompt_tokens: int | None,
) -> list[dict]:
    """One agent step of every active conversation (its tool calls run in its environment); a conversation whose
    agent turn ended asks the simulator for the next user turn. Returns the conversations still going."""
    from .user_sim import ask

    prompts = [
        prompt_ids(tokenizer, {"prompt": c["messages"], "tools": c["schemas"]}, chat_template_kwargs) for c in stepping
    ]
    stepping, prompts, overflowing = _fitting(stepping, prompts, max_prompt_tokens)
    for conversation in overflowing:
        conversation["ended_by"] = "context_overflow"
    if not stepping:
        return []
    outputs = generator.generate(prompts, 1)
    still, turn_over = [], []
    for conversation, samples in zip(stepping, outputs, strict=True):
        ids, text, _ = samples[0]
        conversation["ids"] += list(ids)
        message, calls = _assistant_step(text)
        conversation["messages"].append(message)
        if not calls:
            turn_over.append(conversation)
            continue
        for call in calls:
            arguments = call.get("arguments")
            result = _call_tool(conversation["tools"], call.get("name"), arguments if isinstance(
                arguments, dict) else {})  # fmt: skip
            conversation["messages"].append({"role": "tool", "name": str(call.get("name")), "content": result})
        conversation["n_calls"] += len(calls)
        conversation["steps"] += 1
        if conversation["steps"] > max_steps_per_turn:
            conversation["ended_by"] = "step_limit"
        else:
            still.append(conversation)
    asking = []
    for conversation in turn_over:
        if conversation["user_turns"] >= cap:
            conversation["ended_by"] = "cap"
        else:
            asking.append(conversation)
    answers = ask(user_simulator, [(list(c["messages"]), c["row"], c["user_turns"]) for c in asking])
    for conversation, (messages, error) in zip(asking, answers, strict=True):
        if error is not None:
            conversation["ended_by"], conversation["user_error"] = "user_simulator_error", error
        elif messages is None:
            conversation["ended_by"] = "user"
        else:
            conversation["messages"] += messages
            conversation["user_turns"] += 1
            conversation["steps"] = 0
            still.append(conversation)
    return still


def _conversation_report(
    conversations: list[dict],
    rows: list[dict],
    reward_funcs: Sequence[Callable],
    names: list[str],
    num_samples: int,
    ground_truth_column: str,
    pass_ks: Sequence[int] | None,
) -> dict:
    """The finished conversations scored (the environment's own `get_reward` added when it has one) and reported."""
    reward_funcs, names = list(reward_funcs), list(names)
    environment_type = type(conversations[0]["environment"])
    own = any(getattr(func, "_environment_reward", False) for func in reward_funcs)  # already the default reward
    if callable(getattr(environment_type, "get_reward", None)) and not own:
        reward_funcs.append(lambda environments, **kwargs: [e.get_reward() for e in environments])
        names.append(environment_type.__name__)
    completions = [c["messages"][len(c["prompt"]) :] for c in conversations]
    scores = score(
        reward_funcs,
        [c["row"] for c in conversations],
        completions,
        [c["ids"] for c in conversations],
        environments=[c["environment"] for c in conversations],
    )
    per_sample = []
    for conversation, completion, values in zip(conversations, completions, scores, strict=True):
        sample = _sample(conversation["i"], conversation["j"], conversation["row"], completion, values, names,
                         conversation["ended_by"] not in ("step_limit", "context_overflow"), ground_truth_column)  # fmt: skip
        sample.update(user_turns=conversation["user_turns"], ended_by=conversation["ended_by"])
        if conversation.get("user_error"):
            sample["user_simulator_error"] = conversation["user_error"]
        per_sample.append(sample)

    def count(reason: str) -> int:
        return sum(c["ended_by"] == reason for c in conversations)

    return _report(
        len(rows),
        num_samples,
        names,
        per_sample,
        pass_ks,
        tool_calls=_mean(c["n_calls"] for c in conversations),
        user_turns=_mean(c["user_turns"] for c in conversations),
        user_simulator_failures=count("user_simulator_error"),
        user_turn_cap=count("cap"),
        context_overflow=count("context_overflow"),
        skipped_multi_turn=0,
    )
