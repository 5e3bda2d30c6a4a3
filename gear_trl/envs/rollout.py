"""Multi-turn rollouts on TRL's tool loop: per-row tool schemas, lockstep tool rounds, and per-step records.

`ToolRolloutMixin` sits in front of `GRPOTrainer` in `GEARTrainer`'s bases and overrides a few of its methods:

- `_tokenize_prompts`: a dataset with a `tools` column (JSON list of tool schemas) renders each prompt with its own
  tools, as BFCL-style data needs; without the column TRL's behaviour is unchanged.
- `_tool_call_loop` / `_generate_single_turn`: TRL generates once per tool round, and ranks whose rollouts stop
  calling tools leave the loop early. Under ZeRO-3 every generation gathers parameters collectively, so unequal
  round counts hang or crash the run. Here every rank polls, before each round, whether any rank still has a round to
  run; a rank that is done joins with a throwaway generation until no rank is left, so all ranks make the same number
  of generate calls. Only where a round's generation calls collectively, and only across the ranks it calls with
  (`tool_rounds_need_lockstep`): colocated vLLM's tensor-parallel group, all ranks where parameters are sharded.
  Within a tensor-parallel group every rank also hands vLLM as many prompts (`_generate_in_step`).
- `_generate` / `_calculate_rewards`: record what GiGPO and the tool metrics need (each environment's state key after
  every tool round, the prompts as generated, the completions as messages, the gathered rewards).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
from accelerate.utils import is_peft_model

TOOL_ERROR_PREFIXES = ("Error", "error")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class RolloutRecord:
    """What one generation batch produced on this rank, kept for credit assignment and metrics."""

    prompts: list = field(default_factory=list)
    completions: list = field(default_factory=list)
    rewards_per_func: torch.Tensor | None = None  # [N_global, F], gathered over ranks
    state_history: list[list[str]] | None = None  # per rollout: state key after each tool round, in round order
    tool_calls: ToolCalls | None = None  # every tool call made, cut-off rollouts' included


@dataclass
class ToolCalls:
    """Counts of the tool calls of one generation batch on this rank, taken where the calls happen (so the calls of
    rollouts TRL later cuts at `max_completion_length`, whose results it drops, count too). `trl_calls` and
    `trl_failures` are TRL's own counts (`_tool_call_loop`'s; its `tools/failure_frequency` is their ratio over
    ranks): every call, and the ones that raised or named an unknown tool. `error_texts`: calls that returned an
    error text instead of raising (a result starting with `TOOL_ERROR_PREFIXES`), as gear_trl's own tools do."""

    trl_calls: int = 0
    trl_failures: int = 0
    error_texts: int = 0
    outcomes: list = field(default_factory=list)  # (tool name, error text or None) in call order


def _outcome(result) -> str | None:
    """The error a tool result reports, or None: a result that is text starting with an error prefix."""
    text = result if isinstance(result, str) else None
    if text is None and isinstance(result, dict) and "error" in result:
        return str(result["error"])
    return text if text is not None and text.lstrip("{\"' ").startswith(TOOL_ERROR_PREFIXES) else None


def _counted(calls: ToolCalls, name: str, result):
    """Record a call of tool `name` that returned `result` (an error text counts as a failure) and pass it on."""
    error = _outcome(result)
    calls.error_texts += error is not None
    calls.outcomes.append((name, error))
    return result


def _counting(tool, name: str, calls: ToolCalls):
    """`tool` recording each call's outcome in `calls`: the error it raised (re-raised, for TRL to answer) or the
    error text it returned."""

    @functools.wraps(tool)
    def call(*args, **kwargs):
        try:
            result = tool(*args, **kwargs)
        except Exception as err:
            calls.outcomes.append((name, f"{type(err).__name__}: {err}"))
            raise
        return _counted(calls, name, result)

    return call


def _counting_async(tool, name: str, calls: ToolCalls):
    """`_counting` for a coroutine-function tool."""

    @functools.wraps(tool)
    async def call(*args, **kwargs):
        try:
            result = await tool(*args, **kwargs)
        except Exception as err:
            calls.outcomes.append((name, f"{type(err).__name__}: {err}"))
            raise
        return _counted(calls, name, result)

    return call


def row_tools(row: dict) -> list[dict] | None:
    """The tool schemas of a dataset row's `tools` column (a JSON string or a list), or None."""
    tools = row.get("tools")
    if tools is None or tools == "":
        return None
    if isinstance(tools, str):
        tools = json.loads(tools)
    return list(tools) or None


LOCKSTEP_WORLD = "world"
LOCKSTEP_TENSOR_PARALLEL = "tensor_parallel"


def tool_rounds_need_lockstep(
    args, use_vllm: bool, world_size: int, *, sharded: bool = True, peft: bool = False
) -> str | None:
    """Across which ranks a tool round's generation makes a collective call, so that they must run as many rounds:
    `LOCKSTEP_WORLD` (every rank), `LOCKSTEP_TENSOR_PARALLEL` (the ranks of each vLLM tensor-parallel group), or None.

    Decided from the configuration only. `sharded`: the training engine shards the parameters (DeepSpeed ZeRO-3,
    FSDP), so gathering them is collective; under DDP and ZeRO-2 every rank holds them whole. `peft`: the policy is a
    PEFT model. Transformers generation gathers the parameters in every forward when sharded (kept for every world
    size > 1: its forwards run as ranks wait at the gradient reduction anyway). vLLM's server mode gathers the prompts
    on every rank. Colocated vLLM generates from its own copy of the weights, synced once a step before the first
    round (which every rank runs); a later round calls collectively only (a) with sleep mode, which re-syncs the
    weights at every generation, a gather when sharded, (b) with tensor parallelism, which gathers the prompts within
    the tensor-parallel group, and with PEFT also puts a barrier on every rank before generating.
    """
    if world_size <= 1:
        return None
    if not use_vllm or args.vllm_mode != "colocate":
        return LOCKSTEP_WORLD
    if args.vllm_enable_sleep_mode and sharded:
        return LOCKSTEP_WORLD
    if args.vllm_tensor_parallel_size > 1:
        return LOCKSTEP_WORLD if peft else LOCKSTEP_TENSOR_PARALLEL
    return None


class ToolRolloutMixin:
    """Mixed into GEARTrainer before GRPOTrainer; see the module docstring."""

    _batch_row_tools: list | None = None
    _tool_rounds_in_lockstep = False
    _lockstep_group = None  # the process group the tool rounds poll in; None: every rank
    _rollout: RolloutRecord | None = None
    _tool_truncated: list[bool] | None = None  # per rollout of the last tool loop: ended by the completion budget
    _turns_generated: int | None = None  # generations so far in the running `_generate` (None outside one)

    # --- per-row tool schemas ---------------------------------------------------------------------------------------

    def _set_batch_row_tools(self, inputs: list[dict]) -> None:
        tools = [row_tools(row) for row in inputs]
        self._batch_row_tools = tools if any(t is not None for t in tools) else None

    def _prompt_tools(self, index: int):
        """Tools rendered into prompt `index` of the current batch: the row's own, else the trainer's."""
        if self._batch_row_tools is not None and self._batch_row_tools[index] is not None:
            return self._batch_row_tools[index]
        if self.environment_factories is not None:
            return self._env_tools[self._batch_environments[index]] or None
        return self.tools or None

    def _tokenize_prompts(self, prompts: list):
        if self._batch_row_tools is None or self._is_vlm:
            return super()._tokenize_prompts(prompts)
        prompt_ids = [self._tokenize_one(prompt, self._prompt_tools(i)) for i, prompt in enumerate(prompts)]
        return prompt_ids, None, {}

    def _tokenize_one(self, prompt, tools) -> list[int]:
        """Token ids of one conversational prompt with the generation prompt, as TRL tokenizes prompts."""
        tokenized = self.processing_class.apply_chat_template(
            conversation=[prompt],
            tools=tools,
            chat_template=self.chat_template,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
            **self.chat_template_kwargs,
        )
        return list(tokenized["input_ids"][0])

    # --- lockstep tool rounds -----------------------------------------------------------------------------------------

    def _any_rank_generating(self, generating: bool) -> bool:
        flag = torch.tensor([1 if generating else 0], device=self.accelerator.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._lockstep_group)
        return bool(flag.item())

    def _tool_call_loop(self, prompts, prompt_ids, completion_ids, completions, logprobs, images, multimodal_fields):
        world_size = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        sharded = self._dist.is_zero3 or self._dist.is_fsdp
        peft = is_peft_model(self.model)
        scope = tool_rounds_need_lockstep(self.args, self.use_vllm, world_size, sharded=sharded, peft=peft)
        self._tool_rounds_in_lockstep = scope is not None
        self._lockstep_group = self.vllm_generation.tp_group if scope == LOCKSTEP_TENSOR_PARALLEL else None
        try:
            result = super()._tool_call_loop(
                prompts, prompt_ids, completion_ids, completions, logprobs, images, multimodal_fields
            )
            if self._rollout is not None and self._rollout.tool_calls is not None:
                # TRL's own counts: (tool_mask, completions, completion_ids, logprobs, calls, failures, images)
                calls, failures = result[4], result[5]
                self._rollout.tool_calls.trl_calls += int(calls)
                self._rollout.tool_calls.trl_failures += int(failures)
            stop_ids = {*self.eos_token_ids, self._tokenizer.pad_token_id}
            self._tool_truncated = [
                ran_out_of_budget(messages, ids, stop_ids, self.max_tool_calling_iterations)
                for messages, ids in zip(result[1], result[2], strict=True)
            ]
            if self._tool_rounds_in_lockstep:
                # This rank has no round left; match every round another rank still runs with a throwaway
                # generation, so the collective parameter gathers of generation stay paired across ranks.
                while self._any_rank_generating(False):
                    self._generate_in_step([prompt_ids[0]], None, {}, num_generations=1)
        finally:
            self._tool_rounds_in_lockstep = False
            self._lockstep_group = None
        return result

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        self._record_states_after_round()
        if self._tool_rounds_in_lockstep:
            self._any_rank_generating(True)  # pairs with the polls of ranks that are already done
        return self._generate_in_step(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)

    def _generate_in_step(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """TRL's generation, with as many prompts on every rank of a colocated vLLM tensor-parallel group.

        TRL gathers the group's prompts, generates them all on each rank, and takes its own rank's share as the slice
        `[group rank x its own count, + its own count]`, right only when every rank of the group has as many prompts.
        A tool round regenerates only the rollouts that called a tool, so counts differ between ranks: a rank would
        read another rank's completions, or too few. Ranks short of the group's largest count repeat their first
        prompt and drop its completions.
        """
        short = self._tensor_parallel_shortfall(len(prompt_ids))
        if short:
            prompt_ids = [*prompt_ids, *[prompt_ids[0]] * short]
            images = None if images is None else [*images, *[images[0]] * short]
        completion_ids, logprobs = super()._generate_single_turn(
            prompt_ids, images, multimodal_fields, num_generations, has_tool_images=has_tool_images
        )
        if short:
            completion_ids = completion_ids[:-short]
            logprobs = None if logprobs is None else logprobs[:-short]
        return completion_ids, logprobs

    def _tensor_parallel_shortfall(self, count: int) -> int:
        """How many prompts fewer than the most any rank of its colocated vLLM tensor-parallel group holds (0 outside
        such a group); a collective call within the group, made with each generation, which gathers there anyway."""
        args = self.args
        if not (self.use_vllm and args.vllm_mode == "colocate" and args.vllm_tensor_parallel_size > 1):
            return 0
        most = torch.tensor([count], device=self.accelerator.device)
        dist.all_reduce(most, op=dist.ReduceOp.MAX, group=self.vllm_generation.tp_group)
        return int(most.item()) - count

    # --- records for GiGPO and metrics ----------------------------------------------------------------------------

    def _generate(self, prompts: list):
        history = None
        sync_tools = getattr(self, "_sync_tool_dicts", None) or []
        # TRL runs a round's async tools (coroutine functions) together on its event loop, after the sync ones.
        async_tools = getattr(self, "_async_tool_dicts", None) or [{} for _ in sync_tools]
        calls = ToolCalls()
        for tools in sync_tools:
            for name, tool in list(tools.items()):
                tools[name] = _counting(_text_safe(tool), name, calls)
        for tools in async_tools:
            for name, tool in list(tools.items()):
                tools[name] = _counting_async(_text_safe_async(tool), name, calls)
        if (
            self.environments
            and sync_tools
            and any(callable(getattr(e, "state_key", None)) for e in self.environments)
        ):
            history = [[] for _ in self.environments]  # an environment without `state_key` keeps [] (text anchors)
        self._rollout = RolloutRecord(state_history=history, tool_calls=calls)
        self._turns_generated = 0
        try:
            return super()._generate(prompts)
        finally:
            self._turns_generated = None

    def _record_states_after_round(self) -> None:
        """Before each generation after the first of a `_generate` (each is the next turn, after a tool round), append
        every environment's `state_key()` to its rollout's history: entry k is the state turn k + 1 acts on.

        One entry per round, taken when the round's calls have all run, sync and async alike, and also when TRL answered
        a call without running a tool (an unknown name, arguments that are not a mapping, a call that is not a
        function), so a turn's anchor never depends on which calls ran. Rollouts that left the loop earlier get
        entries too; they have no turn to read them."""
        turns = self._turns_generated
        if turns is None:
            return
        self._turns_generated = turns + 1
        record = self._rollout
        if turns == 0 or record is None or record.state_history is None:
            return
        for environment, history in zip(self.environments, record.state_history, strict=True):
            if callable(getattr(environment, "state_key", None)):
                history.append(environment.state_key())

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        record = self._rollout or RolloutRecord()
        record.prompts, record.completions, record.rewards_per_func = prompts, completions, rewards_per_func
        self._rollout = record
        return rewards_per_func


def harden_response_parser(tokenizer) -> None:
    """Make `tokenizer.parse_response` fail only with ValueError, in place.

    TRL decodes a completion whose tool calls do not parse as plain text (the call then counts in
    `tools/parse_failures`), but it catches only ValueError and TypeError: a model writing tool-call arguments nested
    a few thousand levels deep makes the JSON decoder raise RecursionError, which would end the run. Every other
    exception of the parser is turned into ValueError, so such a completion takes TRL's plain-text fallback too.
    """
    parse = getattr(tokenizer, "parse_response", None)
    if parse is None or getattr(parse, "_gear_hardened", False):
        return

    @functools.wraps(parse)
    def parse_response(*args, **kwargs):
        try:
            return parse(*args, **kwargs)
        except (ValueError, TypeError):
            raise
        except Exception as err:
            raise ValueError(f"unparseable response ({type(err).__name__}: {err})") from err

    parse_response._gear_hardened = True
    tokenizer.parse_response = parse_response


def encodable_text(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD: a tokenizer refuses them (TypeError), and a model can put one
    in a tool argument with a JSON escape (`"\\ud800"`) that a tool may echo back."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)


def _text_safe(tool):
    """`tool` with a string result made encodable (see `encodable_text`); TRL tokenizes every tool result."""
    if getattr(tool, "_gear_text_safe", False):
        return tool

    @functools.wraps(tool)
    def call(*args, **kwargs):
        result = tool(*args, **kwargs)
        return encodable_text(result) if isinstance(result, str) else result

    call._gear_text_safe = True
    return call


def _text_safe_async(tool):
    """`_text_safe` for a coroutine-function tool."""
    if getattr(tool, "_gear_text_safe", False):
        return tool

    @functools.wraps(tool)
    async def call(*args, **kwargs):
        result = await tool(*args, **kwargs)
        return encodable_text(result) if isinstance(result, str) else result

    call._gear_text_safe = True
    return call


# --- reading rollouts (pure functions of messages) ------------------------------------------------------------------


def ran_out_of_budget(completion: list, completion_ids: list[int], stop_ids: set, max_rounds: int) -> bool:
    """Whether a tool rollout ended because its tokens (tool results included) reached `max_completion_length`:
    its last turn was cut before its end-of-turn token, or it asked for tools whose results would not fit (TRL then
    drops those results and stops the rollout, which ends in a stop token and is not counted as clipped).
    `max_rounds`: the tool rounds allowed; a rollout that used them all stopped for that reason instead."""
    if completion_ids and completion_ids[-1] not in stop_ids:
        return True
    if not isinstance(completion, list) or not completion:
        return False
    last = completion[-1]
    if not (isinstance(last, dict) and last.get("role") == "assistant" and last.get("tool_calls")):
        return False
    answered_rounds = sum(
        1
        for message, following in itertools.pairwise(completion)
        if isinstance(message, dict) and message.get("tool_calls") and following.get("role") == "tool"
    )
    return answered_rounds < max_rounds


def assistant_turns(completion: Any) -> list[dict]:
    """The assistant messages of a conversational completion, in order (a string completion is one turn)."""
    if isinstance(completion, str):
        return [{"role": "assistant", "content": completion}]
    return [m for m in completion if isinstance(m, dict) and m.get("role") == "assistant"]


def step_anchors(prompt: Any, completion: Any, state_history: list[str] | None) -> list[str]:
    """GiGPO anchor state of each assistant turn of one rollout (GIGPO.md, step 3).

    Turn 0 acts on the prompt. Turn k > 0 acts on what the tool round after turn k - 1 left: the environment's
    `state_key()` after that round (`state_history[k - 1]`, one entry per round) when the environment has one, else
    the text of that round's tool results.
    """
    prompt_text = prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, ensure_ascii=False)
    if isinstance(completion, str):
        return ["prompt:" + prompt_text]
    anchors: list[str] = []
    results: list[str] = []
    for message in completion:
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            results.append(str(message.get("content", "")))
        elif role == "assistant":
            turn = len(anchors)
            if turn == 0:
                anchors.append("prompt:" + prompt_text)
            elif state_history is not None and turn <= len(state_history):
                anchors.append("state:" + state_history[turn - 1])
            else:
                anchors.append("tools:" + "\n".join(results))
            results = []
    return anchors


def tool_stats(completions: list) -> dict[str, float]:
    """Counts over a batch of rollouts: rollouts, assistant turns, tool calls, tool errors, unparsed tool calls."""
    rollouts = turns = calls = errors = parse_failures = 0
    for completion in completions:
        rollouts += 1
        if isinstance(completion, str):
            turns += 1
            continue
        for message in completion:
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                turns += 1
                content = message.get("content") or ""
                if isinstance(content, str) and "<tool_call>" in content and not message.get("tool_calls"):
                    parse_failures += 1
            elif message.get("role") == "tool":
                calls += 1
                content = message.get("content")
                text = content if isinstance(content, str) else json.dumps(content, default=str)
                if text.lstrip("{\"' ").startswith(TOOL_ERROR_PREFIXES):
                    errors += 1
    return {
        "rollouts": rollouts,
        "turns": turns,
        "tool_calls": calls,
        "tool_errors": errors,
        "parse_failures": parse_failures,
    }
