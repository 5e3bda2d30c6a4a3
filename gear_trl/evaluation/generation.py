"""Generation backends of `gear_trl.evaluate`: batched transformers `generate` (the default) and vLLM (`--backend
vllm`, or `auto` when vLLM is installed and a GPU is visible), behind one interface:

    generator.generate(prompts: list[list[int]], num_samples: int) -> per prompt, num_samples (ids, text, finished)

`ids` are the completion's token ids up to and including the first stop token, `text` their decoding without special
tokens, `finished` whether a stop token ended it before `max_new_tokens`. Both backends take token ids, so prompts are
rendered once, by the chat template, the same way for both.

vLLM runs data parallel over the visible GPUs: one engine per GPU, each in its own process (vLLM's own `LLM` cannot
split a batch across independent replicas in one process), the prompts dealt round-robin and the results put back in
order. With one GPU (or `data_parallel=1`) the engine runs in this process.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..inputs.errors import UserInputError

Completion = tuple[list[int], str, bool]

# Loading a model and rendering a row's prompt, shared by `gear_trl.evaluate` and the simulated user
# (`gear_trl.evaluation.user_sim`), which needs them without importing the evaluation entry point.

ADAPTER_CONFIG = "adapter_config.json"


def is_adapter_dir(path: str) -> bool:
    """Whether `path` is a local PEFT adapter directory (it holds `adapter_config.json`)."""
    return os.path.isfile(os.path.join(path, ADAPTER_CONFIG))


def _torch_dtype(dtype):
    import torch

    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype):
        return dtype or "auto"
    value = getattr(torch, str(dtype), None)
    if isinstance(value, torch.dtype):
        return value
    raise UserInputError(f"Unknown --dtype {dtype!r}; use auto, float32, bfloat16 or float16.")


def adapter_base(path: str) -> str | None:
    """The base model an adapter directory's `adapter_config.json` names (None for anything else)."""
    if not is_adapter_dir(path):
        return None
    with open(os.path.join(path, ADAPTER_CONFIG)) as handle:
        return json.load(handle).get("base_model_name_or_path")


def _tokenizer_source(path: str) -> str:
    """Where `path`'s tokenizer is: an adapter directory when training saved one there, else its base model."""
    base = adapter_base(path)
    if base is None:
        return path
    has_tokenizer = any(
        os.path.isfile(os.path.join(path, name)) for name in ("tokenizer.json", "tokenizer_config.json")
    )
    return path if has_tokenizer else base


def load_tokenizer(path: str):
    """The tokenizer `load_model(path)` loads, alone (for the chat template and prompts before any model loads)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_tokenizer_source(path))


def load_model(path: str, *, dtype="auto", device: str | None = None, merge: bool = True, is_trainable: bool = False):
    """(model, tokenizer) from a model directory / Hub id, or from a LoRA adapter directory.

    An adapter is loaded on the base model its `adapter_config.json` names, and merged into it when `merge` (faster
    generation; `merge=False` keeps the `PeftModel`). The tokenizer comes from the adapter directory when training
    saved one there, else from the base model. `device`: None leaves the model where it was loaded (CPU).
    """
    from transformers import AutoModelForCausalLM

    dtype = _torch_dtype(dtype)
    if is_adapter_dir(path):
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(path, dtype=dtype, is_trainable=is_trainable)
        if merge:
            model = model.merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    tokenizer = load_tokenizer(path)
    if device is not None:
        model = model.to(device)
    return model, tokenizer


GENERATION_CONFIG = "generation_config.json"
GENERATION_KEYS = ("do_sample", "temperature", "top_p", "top_k", "max_new_tokens", "max_length")
"""The sampling settings of a model's `generation_config.json` that evaluation reads and reports."""


def _resolve(source: str, filename: str) -> str | None:
    """`filename` of a model folder or Hub id (from the local cache, or downloaded unless offline); None without."""
    from transformers.utils import cached_file

    try:
        return cached_file(
            source,
            filename,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
        )
    except Exception:  # noqa: BLE001 - a Hub id that cannot be resolved ships nothing we can read
        return None


def _generation_config_file(model: str) -> tuple[dict, str | None]:
    """(`model`'s whole `generation_config.json`, its path): an adapter directory's own file, else its base model's;
    ({}, None) where there is none. A file that is not a JSON object is refused (UserInputError naming it)."""
    base = adapter_base(model)
    for source in [model] + ([base] if base else []):
        path = _resolve(source, GENERATION_CONFIG)
        if path is None:
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError) as err:
            raise UserInputError(f"{path} cannot be read as JSON ({err}); fix or delete it.") from err
        if not isinstance(config, dict):
            raise UserInputError(f"{path} must hold a JSON object.")
        return config, path
    return {}, None


def read_generation_config(model: str) -> tuple[dict, str | None]:
    """(the settings of `GENERATION_KEYS` that `model` sets in its `generation_config.json`, the file read): an
    adapter directory's own file, else its base model's; ({}, None) where there is none."""
    config, path = _generation_config_file(model)
    return {key: config[key] for key in GENERATION_KEYS if key in config}, path


def stop_ids(model: str, tokenizer) -> list[int]:
    """The token ids generation stops at: the `eos_token_id` of `model`'s `generation_config.json` (one id or a list,
    as `generate` reads it: Qwen3 stops at `<|im_end|>` and `<|endoftext|>`), else the tokenizer's end of sequence."""
    eos = _generation_config_file(model)[0].get("eos_token_id")
    if eos is None:
        eos = tokenizer.eos_token_id
    return [eos] if isinstance(eos, int) else [int(token) for token in eos or []]


def shipped_sampling(settings: dict) -> dict:
    """The `evaluate` sampling options (`temperature`, `top_p`, `top_k`, `max_new_tokens`) that a model's
    generation-config settings (`read_generation_config`) set. `do_sample: false` is greedy (temperature 0);
    `do_sample: true` without a temperature samples at transformers' default, 1.0; `max_length` counts the prompt
    too, so it sets nothing here."""
    out: dict = {}
    if settings.get("do_sample") is False:
        out["temperature"] = 0.0
    elif settings.get("temperature") is not None:
        out["temperature"] = float(settings["temperature"])
    elif settings.get("do_sample") is True:
        out["temperature"] = 1.0
    for key, kind in (("top_p", float), ("top_k", int), ("max_new_tokens", int)):
        if settings.get(key) is not None:
            out[key] = kind(settings[key])
    return out


def model_revision(model: str) -> str | None:
    """The Hub commit `model` (an adapter: its base model) was loaded from, read from the local Hub cache's path; None
    for a local folder, or a Hub id that is not cached."""
    from transformers.utils.hub import extract_commit_hash

    source = adapter_base(model) or model
    if os.path.isdir(source) and "snapshots" not in os.path.abspath(source).split(os.sep):
        return None
    path = _resolve(source, "config.json")
    return extract_commit_hash(path, None) if path else None


def _row_tools(row: dict):
    tools = row.get("tools")
    if tools is None or tools == "":
        return None
    tools = json.loads(tools) if isinstance(tools, str) else tools
    return list(tools) or None


def prompt_ids(tokenizer, row: dict, chat_template_kwargs: dict | None = None) -> list[int]:
    """Token ids of a row's prompt with the generation prompt, as GRPO tokenizes prompts (its own tools rendered)."""
    prompt = row["prompt"]
    if isinstance(prompt, str):
        return list(tokenizer(text=[prompt])["input_ids"][0])
    encoded = tokenizer.apply_chat_template(
        conversation=[prompt],
        tools=_row_tools(row),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
        **(chat_template_kwargs or {}),
    )
    return list(encoded["input_ids"][0])


@dataclass
class Sampling:
    """What every backend samples with. temperature 0 is greedy decoding."""

    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = 0


def _cut(ids: list[int], stop: Sequence[int]) -> tuple[list[int], bool]:
    end = next((t for t, token in enumerate(ids) if token in stop), None)
    return (ids[: end + 1], True) if end is not None else (list(ids), False)


class TransformersGenerator:
    """Left-padded batches through `model.generate`, longest prompts first (similar lengths share a batch)."""

    name = "transformers"

    def __init__(
        self, model, tokenizer, sampling: Sampling, *, batch_size: int = 16, progress: Callable | None = None
    ):
        self.model, self.tokenizer, self.sampling, self.batch_size = model, tokenizer, sampling, batch_size
        self.progress = progress
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        if eos is None:
            eos = tokenizer.eos_token_id
        self.stop = [eos] if isinstance(eos, int) else list(eos or [])

    def generate(self, prompts: list[list[int]], num_samples: int = 1) -> list[list[Completion]]:
        import torch
        from transformers import GenerationConfig

        tokenizer, s = self.tokenizer, self.sampling
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        sampling = s.temperature > 0
        config = GenerationConfig(
            max_new_tokens=s.max_new_tokens,
            do_sample=sampling,
            num_return_sequences=num_samples,
            pad_token_id=pad_id,
            eos_token_id=self.stop,
            **({"temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k} if sampling else {}),
        )
        order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
        out: list[list[Completion]] = [[] for _ in prompts]
        model = self.model
        was_training = model.training
        model.eval()
        device = next(model.parameters()).device
        try:
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                width = max(len(prompts[i]) for i in batch)
                input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
                for k, i in enumerate(batch):  # left padding: every prompt ends where generation starts
                    input_ids[k, width - len(prompts[i]) :] = torch.tensor(prompts[i])
                    attention_mask[k, width - len(prompts[i]) :] = 1
                with torch.no_grad():
                    output = model.generate(
                        input_ids=input_ids.to(device),
                        attention_mask=attention_mask.to(device),
                        generation_config=config,
                    )
                generated = output[:, width:].cpu().tolist()
                for k, i in enumerate(batch):
                    for j in range(num_samples):
                        ids, finished = _cut(generated[k * num_samples + j], self.stop)  # unfinished: no padding
                        out[i].append((ids, tokenizer.decode(ids, skip_special_tokens=True), finished))
                if self.progress is not None:
                    self.progress(len(batch))
        finally:
            model.train(was_training)
        return out


def visible_gpus() -> int:
    """The number of CUDA devices this process sees (0 without torch.cuda)."""
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # noqa: BLE001
        return 0


def vllm_available() -> bool:
    """Whether vLLM can be imported."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def _vllm_params(sampling: Sampling, num_samples: int):
    from vllm import SamplingParams

    greedy = sampling.temperature == 0
    return SamplingParams(
        n=num_samples,
        max_tokens=sampling.max_new_tokens,
        temperature=sampling.temperature,
        top_p=1.0 if greedy else sampling.top_p,
        top_k=-1 if greedy or not sampling.top_k else sampling.top_k,  # vLLM's "off" is -1, gear_trl's 0
        seed=sampling.seed,
        skip_special_tokens=True,
    )


def _vllm_run(llm, prompts: list[list[int]], sampling: Sampling, num_samples: int, stop: Sequence[int]):
    """One engine's completions of `prompts`, as plain lists (they cross a process boundary)."""
    outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], _vllm_params(sampling, num_samples))
    result = []
    for output in outputs:
        samples = []
        for candidate in output.outputs:
            ids = list(candidate.token_ids)
            # vLLM stops at the model's EOS itself and keeps it; "length" means max_tokens ran out
            finished = getattr(candidate, "finish_reason", None) == "stop" or any(t in stop for t in ids)
            ids, _ = _cut(ids, stop)
            samples.append((ids, candidate.text, finished))
        result.append(samples)
    return result


def _vllm_worker(rank: int, model: str, engine_kwargs: dict, stop, requests, replies) -> None:
    """One data-parallel engine on GPU `rank`: serves `(prompts, sampling, num_samples)` requests until None."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)
    try:
        from vllm import LLM

        llm = LLM(model=model, **engine_kwargs)
        while (request := requests.get()) is not None:
            prompts, sampling, num_samples = request
            replies.put((rank, "ok", _vllm_run(llm, prompts, sampling, num_samples, stop) if prompts else []))
    except BaseException as err:  # noqa: BLE001 - the parent waits on this queue: tell it, never leave it waiting
        replies.put((rank, "error", f"{type(err).__name__}: {err}"))


class VLLMGenerator:
    """vLLM, one engine per GPU (`data_parallel` of them; default every visible GPU). The engines start on the first
    `generate` and serve every later call (a multi-turn evaluation generates once per step); `close()` stops them."""

    name = "vllm"

    def __init__(
        self,
        model: str,
        tokenizer,
        sampling: Sampling,
        *,
        data_parallel: int | None = None,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        stop: Sequence[int] | None = None,
        start_method: str = "spawn",
    ):
        self.model, self.tokenizer, self.sampling = model, tokenizer, sampling
        self.start_method = start_method  # spawn: CUDA cannot be re-initialised in a forked child
        self.data_parallel = max(1, data_parallel or visible_gpus() or 1)
        self.engine_kwargs = {
            "dtype": dtype,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": sampling.seed or 0,
        }
        if max_model_len is not None:
            self.engine_kwargs["max_model_len"] = max_model_len
        self.stop = list(stop if stop is not None else [tokenizer.eos_token_id])
        self._llm = None
        self._workers: list = []

    def _start(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context(self.start_method)
        self._replies = context.Queue()
        self._requests = [context.Queue() for _ in range(self.data_parallel)]
        self._workers = [
            context.Process(
                target=_vllm_worker,
                args=(rank, self.model, self.engine_kwargs, self.stop, self._requests[rank], self._replies),
                daemon=True,
            )
            for rank in range(self.data_parallel)
        ]
        for worker in self._workers:
            worker.start()

    def _collect(self, count: int) -> dict:
        import queue

        results = {}
        while len(results) < count:
            try:
                rank, status, value = self._replies.get(timeout=5)
            except queue.Empty:
                dead = [
                    rank for rank, worker in enumerate(self._workers) if not worker.is_alive() and rank not in results
                ]
                if dead:
                    self.close()
                    raise RuntimeError(f"vLLM data-parallel worker(s) {dead} died without an answer.") from None
                continue
            if status != "ok":
                self.close()
                raise RuntimeError(f"vLLM worker {rank} failed: {value}")
            results[rank] = value
        return results

    def generate(self, prompts: list[list[int]], num_samples: int = 1) -> list[list[Completion]]:
        if self.data_parallel == 1:
            if self._llm is None:
                from vllm import LLM

                self._llm = LLM(model=self.model, **self.engine_kwargs)
            return _vllm_run(self._llm, prompts, self.sampling, num_samples, self.stop)
        if not self._workers:
            self._start()
        shards = [list(range(rank, len(prompts), self.data_parallel)) for rank in range(self.data_parallel)]
        for rank, shard in enumerate(shards):  # every engine gets a request, an empty one too: one reply each
            self._requests[rank].put(([prompts[i] for i in shard], self.sampling, num_samples))
        results = self._collect(self.data_parallel)
        out: list[list[Completion]] = [[] for _ in prompts]
        for rank, shard in enumerate(shards):
            for position, i in enumerate(shard):
                out[i] = results[rank][position]
        return out

    def close(self) -> None:
        """Stop the data-parallel engines (the in-process one is freed with this object)."""
        for requests, worker in zip(getattr(self, "_requests", []), self._workers, strict=False):
            if worker.is_alive():
                requests.put(None)
        for worker in self._workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.terminate()
        self._workers = []
