"""What bench/overhead.py runs: the configurations it compares, the shapes (model + batch geometry) it runs them
at, and a shape's model, prompt rows and pre-drawn completions."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TINY_MODEL = REPO_ROOT / "data" / "tiny-qwen3"
MATH_DATA = REPO_ROOT / "data" / "math" / "gsm8k_style" / "train.jsonl"

GEAR_MODES = ("none", "token", "turn", "fixed", "gear-no-entropy", "gear")
NO_SHARING = "gear/gear:no_prefix_sharing"  # credit gear, `teacher_prefix_sharing: false` (the full teacher pass)
TRAINER_CONFIGS = (
    "grpo",
    *(f"gear/{mode}" for mode in GEAR_MODES),
    NO_SHARING,
    "sdpo/full_logits",
    "sdpo/topk_logits",
)
PSEUDO_CONFIGS = ("gigpo", "hf_generate")  # timed in the same round-robin, but not training steps


# ---------------------------------------------------------------------------------------------------------------------
# Shapes


@dataclass
class Shape:
    """One model + batch geometry. `batch` completions per step, `num_generations` per prompt, `length` tokens each."""

    name: str
    model: str  # "tiny": data/tiny-qwen3; else a random model of `model_config` (see the dicts below)
    batch: int
    num_generations: int
    length: int
    reps: int
    warmup_length: int  # completion length of the warm-up round (code paths and allocator, not the timings)
    hf_generate: bool = False
    model_config: dict = field(default_factory=dict)
    prompt_tokens: int | None = None  # None: the GSM8K-style questions as they are; else prompts of about this length
    configs: tuple[str, ...] | None = None  # None: every configuration asked for


QWEN3_VOCAB = 151_936
VOCAB_BACKBONE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": QWEN3_VOCAB,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
}
# Qwen3's head geometry at a width a CPU runs: 128-wide heads, 4 query heads per key/value head, MLP 4x the width.
# Per token and layer at the long_prompt shape's ~1,150 keys on average (full teacher pass), attention is ~80% of the
# tiny test model's FLOPs (16-wide heads, hidden 64: 0.29 of 0.37 MFLOP), ~50% of this backbone's (2.4 of 4.6) and ~9%
# of Qwen3-4B's (19 of 221): this shape stays more attention-bound than a real model, the tiny model far more so.
# The tiny tokenizer's vocabulary keeps the LM head small: this shape is about the prompt, `vocab` about the head.
LONG_PROMPT_BACKBONE = {
    "hidden_size": 256,
    "intermediate_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 128,
    "vocab_size": 2264,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
}
QWEN3_4B = {  # Qwen/Qwen3-4B's config.json geometry
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": QWEN3_VOCAB,
    "max_position_embeddings": 40960,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0},
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
}


def make_shapes(args) -> list[Shape]:
    quick = args.quick
    shapes = {
        "tiny": Shape(
            "tiny",
            "tiny",
            batch=8,
            num_generations=4,
            length=64 if quick else 128,
            reps=3 if quick else 20,
            warmup_length=16,
            hf_generate=True,
        ),
        "long_prompt": Shape(  # an agent-sized prompt (BFCL multi-turn rows are longer still, see NOTES.md)
            "long_prompt",
            "qwen3-proportions",
            batch=8,
            num_generations=8,
            length=256,
            reps=3 if quick else 12,
            warmup_length=16,
            hf_generate=True,
            prompt_tokens=2048,
            model_config=LONG_PROMPT_BACKBONE,
            configs=("grpo", "gear/gear", NO_SHARING, "hf_generate"),
        ),
        "vocab": Shape(
            "vocab",
            "vocab",
            batch=2,
            num_generations=2,
            length=256 if quick else 1024,
            reps=2 if quick else 4,
            warmup_length=32,
            hf_generate=True,
            model_config=VOCAB_BACKBONE,
            configs=tuple(c for c in TRAINER_CONFIGS + PSEUDO_CONFIGS if c != NO_SHARING),
        ),
        "qwen3-4b": Shape(
            "qwen3-4b",
            "qwen3-4b",
            batch=8,
            num_generations=8,
            length=1024 if quick else 4096,
            reps=2 if quick else 3,
            warmup_length=64,
            model_config=QWEN3_4B,
        ),
    }
    if args.shape == "all":
        names = ["tiny", "long_prompt", "vocab"] if args.device == "cpu" else ["tiny", "long_prompt", "qwen3-4b"]
    elif args.shape is None:
        names = ["tiny", "long_prompt", "vocab"] if args.device == "cpu" else ["qwen3-4b"]
    else:
        names = [args.shape]
    chosen = []
    for name in names:
        shape = shapes[name]
        overrides = {}
        if args.batch is not None:
            overrides["batch"] = args.batch
        if args.num_generations is not None:
            overrides["num_generations"] = args.num_generations
        if args.completion_length is not None:
            overrides["length"] = args.completion_length
        if args.reps is not None:
            overrides["reps"] = args.reps
        if args.tiny_model:
            overrides["model"], overrides["model_config"] = "tiny", {}
        if args.prompt_tokens is not None and shape.prompt_tokens:
            overrides["prompt_tokens"] = args.prompt_tokens
        shape = replace(shape, **overrides)
        if shape.batch % shape.num_generations:
            raise SystemExit(
                f"--batch ({shape.batch}) must be a multiple of --num-generations ({shape.num_generations})"
            )
        chosen.append(shape)
    return chosen


# ---------------------------------------------------------------------------------------------------------------------
# Model and data


def build_model_config(shape: Shape):
    from transformers import AutoConfig, Qwen3Config

    if shape.model == "tiny":
        return AutoConfig.from_pretrained(TINY_MODEL)
    tiny = AutoConfig.from_pretrained(TINY_MODEL)
    # The tiny tokenizer's special ids; the model's vocabulary is larger than the tokenizer's, which is fine: prompts
    # use the tokenizer's ids and pre-drawn completions the whole range.
    return Qwen3Config(
        bos_token_id=tiny.bos_token_id,
        eos_token_id=tiny.eos_token_id,
        pad_token_id=tiny.pad_token_id,
        attention_dropout=0.0,
        **shape.model_config,
    )


def build_model(shape: Shape, device: str):
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen3ForCausalLM

    if shape.model == "tiny":
        model = AutoModelForCausalLM.from_pretrained(TINY_MODEL, dtype=torch.float32)
        return model.to(device)
    config = build_model_config(shape)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(config, dtype=dtype, attn_implementation="sdpa")
    model.generation_config = GenerationConfig.from_pretrained(TINY_MODEL)
    return model


def build_rows(shape: Shape, tokenizer=None) -> list[dict]:
    """The generation batch the sampler would build: `batch / num_generations` prompts, each repeated. With
    `shape.prompt_tokens`, each question follows a context of other GSM8K-style problems that brings its chat-templated
    prompt to just under that many tokens (the tokenizer is then required)."""
    from datasets import Dataset

    from gear_trl.data import prepare_dataset
    from gear_trl.trainer.gear_config import DEFAULT_MATH_TEACHER_TEMPLATE

    lines = MATH_DATA.read_text().splitlines()
    raw = [json.loads(line) for line in lines[: shape.batch // shape.num_generations]]
    prepared = prepare_dataset(Dataset.from_list(raw), "gsm8k")
    if shape.prompt_tokens:
        words = " ".join(json.loads(line)["question"] for line in lines[len(raw) :]).split()
        prepared = [
            dict(row, prompt=_padded_prompt(row["prompt"], words, tokenizer, shape.prompt_tokens)) for row in prepared
        ]
    rows = []
    for row in prepared:
        # SDPO's teacher sees the same information as GEAR's: the ground truth, as environment feedback.
        hint = DEFAULT_MATH_TEACHER_TEMPLATE.format(ground_truth=row["ground_truth"]).strip()
        rows.extend(dict(row, privileged_context=hint) for _ in range(shape.num_generations))
    return rows


def _padded_prompt(prompt: list[dict], words: list[str], tokenizer, target: int) -> list[dict]:
    """`prompt` with `Context: <first k words>` before its last user message's text, k the largest that keeps the
    chat-templated prompt (generation prompt included) at most `target` tokens."""

    def build(k):
        messages = copy.deepcopy(prompt)
        messages[-1]["content"] = "Context: " + " ".join(words[:k]) + "\n\n" + messages[-1]["content"]
        return messages

    def length(k):
        return len(
            tokenizer.apply_chat_template(build(k), add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )

    low, high = 0, len(words)
    if length(high) <= target:
        raise ValueError(f"not enough context words for a {target}-token prompt")
    while low < high - 1:
        middle = (low + high) // 2
        low, high = (middle, high) if length(middle) <= target else (low, middle)
    return build(low)


def draw_completions(shape: Shape, vocab_size: int, tokenizer, length: int, seed: int) -> list[list[int]]:
    """Random completion ids over the model's whole vocabulary, never a special token (so never EOS)."""
    import torch

    special = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (shape.batch, length), generator=generator)
    bad = torch.isin(ids, special)
    ids[bad] = ids[bad] % int(special.min())  # the tokenizer's special ids sit above its ordinary ones
    return ids.tolist()


# ---------------------------------------------------------------------------------------------------------------------
# Dry run: the CUDA model's geometry on the meta device (no memory, no GPU)


def describe_model(shape: Shape) -> dict:
    import torch
    from transformers import Qwen3ForCausalLM

    config = build_model_config(shape)
    dtype = torch.bfloat16 if shape.model == "qwen3-4b" else torch.float32
    with torch.device("meta"):
        model = Qwen3ForCausalLM._from_config(config, dtype=dtype)
    params = sum(p.numel() for p in model.parameters())
    bytes_per = torch.finfo(dtype).bits // 8
    logits = shape.batch * shape.length * config.vocab_size * bytes_per
    return {
        "shape": shape.name,
        "parameters": params,
        "dtype": str(dtype),
        "weights_gb": params * bytes_per / 2**30,
        "hidden_size": config.hidden_size,
        "layers": config.num_hidden_layers,
        "vocab_size": config.vocab_size,
        "one_BxTxV_logits_tensor_gb": logits / 2**30,
        "gear_chunk_logits_gb": 128 * config.vocab_size * 4 / 2**30,
    }
