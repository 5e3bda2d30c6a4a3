"""A stand-in for vLLM with the two names gear_trl.evaluation.generation uses (`LLM`, `SamplingParams`), so the vLLM backend's
code path runs on CPU in the tests. `LLM.generate` answers every prompt with `ANSWER` (default: the sum of the
first two integers of the prompt's user text, boxed, and the GPU the engine was given) and records what it was
given."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

CREATED: list[dict] = []
"""The keyword arguments of every `LLM(...)` built in this process."""


class SamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.n = kwargs.get("n", 1)


class LLM:
    def __init__(self, model: str, **kwargs):
        from transformers import AutoTokenizer

        self.model, self.kwargs = model, kwargs
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.device = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        self.requests: list = []
        CREATED.append({"model": model, **kwargs})

    def generate(self, prompts, sampling_params):
        self.requests.append((prompts, sampling_params))
        outputs = []
        for prompt in prompts:
            text = self.tokenizer.decode(prompt["prompt_token_ids"])
            numbers = [int(n) for n in re.findall(r"\d+", text.split("user", 1)[-1])][:2]
            answer = os.environ.get("FAKE_VLLM_ANSWER") or f"\\boxed{{{sum(numbers)}}} on gpu {self.device}"
            ids = self.tokenizer(answer)["input_ids"] + [self.tokenizer.eos_token_id]
            candidates = [
                SimpleNamespace(token_ids=ids, text=answer, finish_reason="stop") for _ in range(sampling_params.n)
            ]
            outputs.append(SimpleNamespace(outputs=candidates))
        return outputs
