"""Recipe smoke runs: a shipped Qwen3 recipe against a 2-layer stand-in of its model, through `gear_trl.train`.

The stand-in has the model's exact configuration (Qwen3-4B's or Qwen3-8B's config.json) but its layer count, random
weights, and the repository's tokenizer with TRL's Qwen3 template. `CPU_OVERRIDES` lists, in one place, what a CPU
run changes in a recipe; everything else (LoRA, gradient checkpointing, loss type, `steps_per_generation` through
`gradient_accumulation_steps`, the credit fields) runs as shipped.

Run as a script (`python -m tests.recipe_smoke RESULT.json -- <gear_trl.train arguments>`, one process or under
`accelerate launch`), it trains, then writes the steps made, the time and the peak memory to RESULT.json.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOKENIZER = REPO / "data" / "tiny-qwen3"

# config.json of the Hub models the recipes name, but the layer count (36 in both).
QWEN3_CONFIGS = {
    "Qwen/Qwen3-4B": {"hidden_size": 2560, "intermediate_size": 9728, "tie_word_embeddings": True},
    "Qwen/Qwen3-8B": {"hidden_size": 4096, "intermediate_size": 12288, "tie_word_embeddings": False},
}
QWEN3_COMMON = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 151936,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "use_sliding_window": False,
    "sliding_window": None,
    "initializer_range": 0.02,
    "use_cache": True,
}
STAND_IN_LAYERS = 2

# What a CPU run changes in a shipped recipe, and why; nothing else is overridden.
CPU_OVERRIDES = {
    "use_vllm": "false",  # vLLM needs a GPU
    "use_cpu": "true",
    "bf16": "false",  # bf16 on CPU takes oneDNN's slow path (README, "CPU"); float32 weights and compute instead
    "dtype": "float32",
    "per_device_train_batch_size": "2",  # CI time and memory: 2 rollouts a micro-batch, of 2 per prompt; the
    "num_generations": "2",  # recipe's gradient_accumulation_steps (= steps_per_generation) stays as shipped
    "max_completion_length": "24",  # CI time
    "max_steps": "2",
    "save_strategy": "no",
    "report_to": "none",
    "push_to_hub": "false",  # no Hub
    "log_completions": "false",
    "eval_strategy": "no",
}
# Datasets the recipes name that a CPU test cannot use as they are: the Hub's (unreachable) and BFCL multi-turn's
# 4,000-8,000-token prompts (minutes a forward at the stand-in's width on two cores). Same schema and adapter.
LOCAL_DATA = {
    "DigitalLearningGmbH/MATH-lighteval": "data/math/math_style",
    "Salesforce/xlam-function-calling-60k": "data/xlam_sample",
}
# The held-out benchmarks the math recipes name are on the Hub too: a local set of other questions stands in for them
# (the overlap check runs as shipped; the local held-out sets, BFCL's, are kept).
LOCAL_HELD_OUT = "data/math/gsm8k_style"
SMOKE_REWARD = "smoke_even_tokens"  # a random stand-in scores 0 on the shipped rewards: no advantage, no update


def even_token_share(completions, completion_ids, **kwargs) -> list[float]:
    """Share of even token ids in each completion: varies between random completions, so advantages are not all 0.
    (Text rewards do not: a random 151,936-token head mostly writes ids the repository's tokenizer decodes to "".)"""
    return [sum(1 for token in ids if token % 2 == 0) / max(len(ids), 1) for ids in completion_ids]


def build_stand_in(model_id: str, path: Path, layers: int = STAND_IN_LAYERS) -> Path:
    """Write a random-weight stand-in of `model_id` with `layers` layers to `path` (bf16 on disk; the smoke run loads
    it in float32), with the repository's tokenizer."""
    import torch
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    if (path / "config.json").exists():
        return path
    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER)
    config = Qwen3Config(
        **QWEN3_COMMON,
        **QWEN3_CONFIGS[model_id],
        num_hidden_layers=layers,
        max_window_layers=layers,
        # the special tokens of the tokenizer the stand-in is run with
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    partial = path.with_name(path.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.rename(path)
    return path


def smoke_argv(recipe_path: Path, stand_in: Path, output_dir: Path) -> list[str]:
    """`gear_trl.train` arguments: the recipe, then `CPU_OVERRIDES`, the stand-in, a local dataset where needed, and
    the smoke reward beside the shipped ones."""
    import yaml

    recipe = yaml.safe_load(recipe_path.read_text())
    argv = ["--config", str(recipe_path), "--model_name_or_path", str(stand_in), "--output_dir", str(output_dir)]
    for key, value in CPU_OVERRIDES.items():
        argv += [f"--{key}", value]
    if recipe["dataset_name"] in LOCAL_DATA:
        argv += ["--dataset_name", str(REPO / LOCAL_DATA[recipe["dataset_name"]])]
    elif not recipe["dataset_name"].startswith("data/"):  # a Hub id with no local stand-in would fail offline, later
        raise KeyError(f"{recipe_path}: no local stand-in for {recipe['dataset_name']!r} in LOCAL_DATA")
    held_out = recipe.get("held_out_datasets") or []
    if held_out:
        argv += ["--held_out_datasets", *sorted({s if s.startswith("data/") else LOCAL_HELD_OUT for s in held_out})]
    argv += ["--reward_funcs", *recipe["reward_funcs"], SMOKE_REWARD]
    return argv


def _run(result_path: str, argv: list[str]) -> None:
    sys.path.insert(0, str(REPO))
    from gear_trl.rewards import REWARD_FUNCS
    from gear_trl.train import main, parse_args

    REWARD_FUNCS[SMOKE_REWARD] = even_token_share
    start = time.perf_counter()
    trainer = main(*parse_args(argv))
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak_gb = usage.ru_maxrss / 2**20  # KiB on Linux
    rank = int(os.environ.get("RANK", "0"))
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    result = {
        "global_step": trainer.state.global_step,
        "seconds": seconds,
        "peak_rss_gb": peak_gb,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,  # the whole process: model load and stand-in read included
        "losses": [entry["loss"] for entry in logs],
        "grad_norms": [entry.get("grad_norm") for entry in logs],
        "gear_kl_mean": [entry.get("gear/kl_mean") for entry in logs],
        "gradient_checkpointing": trainer.args.gradient_checkpointing,
        "loss_type": trainer.args.loss_type,
        "steps_per_generation": trainer.args.steps_per_generation,
        "credit": trainer.args.credit,
    }
    Path(f"{result_path}.rank{rank}").write_text(json.dumps(result))


if __name__ == "__main__":
    separator = sys.argv.index("--")
    _run(sys.argv[1], sys.argv[separator + 1 :])
