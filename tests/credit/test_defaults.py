"""Defaults that live in two places come from one constant."""

import dataclasses
import inspect

from gear_trl import GEARConfig
from gear_trl.credit import reverse_kl_and_entropy
from gear_trl.credit.divergence import DEFAULT_CHUNK_SIZE


def test_divergence_chunk_size_has_one_default():
    # Called directly (benchmarks, tests) or through the trainer, the LM head is chunked the same way.
    function_default = inspect.signature(reverse_kl_and_entropy).parameters["chunk_size"].default
    config_default = {f.name: f.default for f in dataclasses.fields(GEARConfig)}["divergence_chunk_size"]
    assert function_default == config_default == DEFAULT_CHUNK_SIZE
