"""A stand-in for vLLM's offline engine, so that TRL's colocated vLLM path runs on a machine without vLLM or a GPU.

TRL's `VLLMGeneration` (trl/generation/vllm_generation.py) in `vllm_mode="colocate"` builds a `vllm.LLM` on every
rank, pushes the policy's weights into it before generating (`sync_weights`: TRL's own parameter walk, which gathers
each parameter under ZeRO-3), and reads completions and the sampled tokens' log-probabilities back from
`LLM.generate`. `colocated_vllm_standin()` swaps in, for the duration of a block, the few vLLM names that module uses
(`LLM`, `SamplingParams`, `StructuredOutputsParams` and its availability check): everything else on the path is TRL's
and GEAR's own code, including the weight sync, the tensor-parallel prompt gathers, sleep mode and the importance-
sampling correction.

The engine is a transformers copy of the model, loaded from the policy's path as vLLM loads it and then overwritten
by every weight sync. It samples at the requested temperature (top-p, top-k, min-p and repetition penalty are refused,
not ignored) and reports each sampled token's log-probability after temperature (vLLM's `processed_logprobs`) minus
`logprob_offset`: a known mismatch between the sampler and the trainer, so that TRL's importance-sampling ratios are
``exp(logprob_offset x tokens)`` per sequence instead of 1. A `script` may choose a completion's text instead of
sampling it (a random tiny model writes no tool calls); its tokens are scored the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace

import torch

DEFAULT_LOGPROB_OFFSET = 0.02
"""Nats subtracted from every reported log-probability: large enough that a sequence's ratio is visibly not 1, small
enough that TRL's default cap (3.0) masks no 16-token sequence. Our choice for tests."""


class SamplingParams:
    """vLLM's `SamplingParams` as TRL builds it: keyword arguments kept as attributes."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class StructuredOutputsParams(SamplingParams):
    """Accepted so that TRL can build it; the stand-in refuses structured outputs at generation."""


@dataclass
class _Logprob:
    logprob: float
    rank: int = 1


@dataclass
class StandInLLM:
    """What TRL reads of `vllm.LLM` in colocate mode: `generate`, `llm_engine` (the model config's `max_model_len`
    and the model runner's `load_weights`), `sleep`, `wake_up` and `reset_prefix_cache`."""

    model: str
    seed: int = 0
    max_model_len: int | None = None
    tensor_parallel_size: int = 1
    logprob_offset: float = DEFAULT_LOGPROB_OFFSET
    script: Callable[[list[int]], str | None] | None = None
    calls: dict = field(default_factory=lambda: {"generate": 0, "load_weights": 0, "sleep": 0, "wake_up": 0})

    def __post_init__(self):
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        from transformers.integrations import deepspeed as hf_deepspeed

        # vLLM loads whole weights of its own from the model's path; under ZeRO-3 transformers would partition them.
        saved, hf_deepspeed._hf_deepspeed_config_weak_ref = hf_deepspeed._hf_deepspeed_config_weak_ref, None
        try:
            self.hf_model = AutoModelForCausalLM.from_pretrained(self.model, dtype=torch.float32).eval()
        finally:
            hf_deepspeed._hf_deepspeed_config_weak_ref = saved
        self.hf_model.requires_grad_(False)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model)
        try:
            eos = GenerationConfig.from_pretrained(self.model).eos_token_id
        except OSError:
            eos = self.hf_model.config.eos_token_id
        eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
        self.stop_ids = {*eos, self.tokenizer.eos_token_id} - {None}
        self.generator = torch.Generator().manual_seed(self.seed)
        max_len = self.max_model_len or self.hf_model.config.max_position_embeddings
        runner = SimpleNamespace(model=SimpleNamespace(load_weights=self.load_weights))
        self.llm_engine = SimpleNamespace(
            model_config=SimpleNamespace(max_model_len=max_len),
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)),
        )

    def load_weights(self, weights) -> None:
        params = dict(self.hf_model.named_parameters())
        for name, tensor in weights:
            if name not in params:
                raise KeyError(f"the weight sync sent {name!r}, which the model has no parameter of")
            if params[name].shape != tensor.shape:
                raise ValueError(f"{name}: synced {tuple(tensor.shape)} into {tuple(params[name].shape)}")
            params[name].data.copy_(tensor.detach().to(torch.float32))
            self.calls["load_weights"] += 1

    def sleep(self, level: int = 1) -> None:
        self.calls["sleep"] += 1

    def wake_up(self, tags=None) -> None:
        self.calls["wake_up"] += 1

    def reset_prefix_cache(self) -> None:
        pass

    @torch.no_grad()
    def generate(self, prompts: list[dict], sampling_params: SamplingParams, use_tqdm: bool = False) -> list:
        unsupported = {
            "n": 1,
            "top_p": 1.0,
            "top_k": 0,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "structured_outputs": None,
        }
        for name, default in unsupported.items():
            value = getattr(sampling_params, name, default)
            if value != default and not (name == "top_k" and value in (-1, None)):
                raise NotImplementedError(f"the vLLM stand-in samples with {name}={default} only; got {value!r}")
        self.calls["generate"] += 1
        outputs = []
        for prompt in prompts:
            if "multi_modal_data" in prompt:
                raise NotImplementedError("the vLLM stand-in generates text only")
            ids = list(prompt["prompt_token_ids"])
            text = self.script(ids) if self.script is not None else None
            forced = None if text is None else self.tokenizer(text, add_special_tokens=False)["input_ids"]
            tokens, logprobs = self._complete(ids, sampling_params, forced)
            completion = SimpleNamespace(
                token_ids=tokens, logprobs=[{t: _Logprob(lp - self.logprob_offset)} for t, lp in zip(tokens, logprobs)]
            )
            outputs.append(SimpleNamespace(prompt_token_ids=ids, outputs=[completion]))
        return outputs

    def _complete(self, prompt: list[int], params: SamplingParams, forced: list[int] | None):
        """Sampled (or `forced`, then closed by a stop token) completion tokens and their log-probabilities at
        temperature, one token at a time with the KV cache, stopping at a stop token or `max_tokens`."""
        temperature = params.temperature
        budget = min(params.max_tokens or self.llm_engine.model_config.max_model_len, self._room(prompt))
        if forced is not None:  # closed as the model closes a turn: the tokenizer's end-of-sequence token
            eos = self.tokenizer.eos_token_id
            forced = [*forced, eos if eos is not None else min(self.stop_ids)] if self.stop_ids else forced
        tokens, logprobs = [], []
        past, step_ids = None, torch.tensor([prompt])
        while len(tokens) < budget:
            out = self.hf_model(input_ids=step_ids, past_key_values=past, use_cache=True)
            past = out.past_key_values
            log_p = torch.log_softmax(out.logits[0, -1].float() / temperature, dim=-1)
            if forced is not None:
                token = forced[len(tokens)]
            else:
                token = int(torch.multinomial(log_p.exp(), 1, generator=self.generator))
            tokens.append(token)
            logprobs.append(float(log_p[token]))
            if token in self.stop_ids or (forced is not None and len(tokens) == len(forced)):
                break
            step_ids = torch.tensor([[token]])
        return tokens, logprobs

    def _room(self, prompt: list[int]) -> int:
        return max(self.llm_engine.model_config.max_model_len - len(prompt), 0)


@contextmanager
def colocated_vllm_standin(
    logprob_offset: float = DEFAULT_LOGPROB_OFFSET, script: Callable[[list[int]], str | None] | None = None
) -> Iterator[list[StandInLLM]]:
    """Within the block, a trainer built with `use_vllm=True, vllm_mode="colocate"` generates with `StandInLLM`.

    Yields the list of engines built in the block (one per trainer). `script(prompt_ids) -> text or None` chooses a
    completion's text (closed by a stop token) instead of sampling it. TRL's `_init_vllm` writes RANK, LOCAL_RANK,
    WORLD_SIZE, MASTER_ADDR and MASTER_PORT into the environment; they are restored on exit.
    """
    from trl.generation import vllm_generation

    built: list[StandInLLM] = []

    def make_llm(model, *, seed=0, max_model_len=None, tensor_parallel_size=1, **_):
        llm = StandInLLM(
            model,
            seed=seed,
            max_model_len=max_model_len,
            tensor_parallel_size=tensor_parallel_size,
            logprob_offset=logprob_offset,
            script=script,
        )
        built.append(llm)
        return llm

    names = {
        "is_vllm_available": lambda *args, **kwargs: True,
        "LLM": make_llm,
        "SamplingParams": SamplingParams,
        "StructuredOutputsParams": StructuredOutputsParams,
    }
    missing = object()
    saved_names = {name: getattr(vllm_generation, name, missing) for name in names}
    env_names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    saved_env = {name: os.environ.get(name) for name in env_names}
    for name, value in names.items():
        setattr(vllm_generation, name, value)
    try:
        yield built
    finally:
        for name, value in saved_names.items():
            if value is missing:
                delattr(vllm_generation, name)
            else:
                setattr(vllm_generation, name, value)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
