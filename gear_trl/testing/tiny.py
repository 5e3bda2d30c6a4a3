"""A tiny Qwen3 stand-in for tests and smoke runs: a byte-level BPE tokenizer with Qwen3's special tokens and chat
template, and a random-weight `Qwen3ForCausalLM` of any small size.

Nothing is downloaded: the tokenizer is trained here on synthetic text (the math datasets under `data/math/`,
tool-calling conversations and template English generated below), so the committed `data/tiny-qwen3/` can be rebuilt
offline with

    python data/scripts/make_tiny_model.py

Tests build models of other sizes from the committed tokenizer with `build_tiny_qwen3(tokenizer, hidden_size=...)`.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from tokenizers import (
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from trl.chat_template_utils import qwen3_chat_template

REPO_ROOT = Path(__file__).resolve().parents[2]  # the defaults below are for a checkout
DEFAULT_OUTPUT_DIR = REPO_ROOT / "data" / "tiny-qwen3"
DEFAULT_DATA_DIR = REPO_ROOT / "data" / "math"

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = [PAD_TOKEN, "<|im_start|>", EOS_TOKEN]
"""Control tokens, `special=True` as in Qwen3: dropped by `decode(..., skip_special_tokens=True)`."""
ADDED_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
"""Single-id markers that, as in Qwen3, are not special: they survive `skip_special_tokens=True`, which TRL's
tool-call parsing relies on."""

# Qwen2/Qwen3's pre-tokenizer split: digits one at a time, words with their leading space, punctuation runs.
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

TINY_SIZES: dict[str, int] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 2048,
}


def train_tokenizer(texts: Iterable[str], vocab_size: int = 3000) -> PreTrainedTokenizerFast:
    """Train a Qwen3-style byte-level BPE tokenizer on `texts`.

    Args:
        texts: training text; occurrences of the special and added tokens are removed first, as those are never
            split into BPE pieces.
        vocab_size: upper bound on `len(tokenizer)`, special and added tokens included (the BPE stops earlier when
            the text has no more pairs worth merging).

    Returns:
        A tokenizer with `<|endoftext|>` as pad token, `<|im_end|>` as eos token, no bos token, the six non-special
        added tokens of `ADDED_TOKENS`, and TRL's Qwen3 chat template. Special and added tokens take the last ids, in
        Qwen3's order.
    """
    reserved = SPECIAL_TOKENS + ADDED_TOKENS
    backend = Tokenizer(models.BPE())
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    backend.decoder = decoders.ByteLevel()

    def without_reserved(stream: Iterable[str]) -> Iterator[str]:
        for text in stream:
            for token in reserved:
                text = text.replace(token, "\n")
            yield text

    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(reserved),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(without_reserved(texts), trainer=trainer)
    backend.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS])
    backend.add_tokens([AddedToken(token, special=False, normalized=False) for token in ADDED_TOKENS])

    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=None,
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        unk_token=None,
        extra_special_tokens=["<|im_start|>", EOS_TOKEN],  # Qwen3's `additional_special_tokens` start the same way
        chat_template=qwen3_chat_template,
        model_max_length=TINY_SIZES["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )


def build_tiny_qwen3(tokenizer: PreTrainedTokenizerFast, seed: int = 0, **sizes: Any) -> Qwen3ForCausalLM:
    """A random-weight float32 `Qwen3ForCausalLM` whose vocabulary and special ids match `tokenizer`.

    Args:
        tokenizer: e.g. from `train_tokenizer` or `AutoTokenizer.from_pretrained("data/tiny-qwen3")`.
        seed: weights are a function of the seed and the sizes.
        **sizes: `Qwen3Config` fields overriding `TINY_SIZES` (e.g. `hidden_size=32, num_hidden_layers=1`).
    """
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        tie_word_embeddings=True,
        # Qwen3 has no bos token in its tokenizer; its config uses <|endoftext|> as bos, and so does this one.
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        **{**TINY_SIZES, **sizes},
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id)
    return model


# ---------------------------------------------------------------------------------------------------------------------
# Synthetic training text for the tokenizer
# ---------------------------------------------------------------------------------------------------------------------

_SUBJECTS = ["The teacher", "A small dog", "My neighbor", "The old farmer", "Our team", "The pilot", "A student",
             "The doctor", "Her brother", "The city council", "A young artist", "The engineer", "Each player",
             "The bakery", "This company", "The museum", "Every child", "The river", "A quiet girl",
             "The robot"]  # fmt: skip
_VERBS = ["found", "painted", "opened", "carried", "visited", "described", "repaired", "cleaned", "counted",
          "ordered", "measured", "watched", "followed", "explained", "answered", "borrowed", "delivered", "checked",
          "planted", "discovered", "wrote", "built", "moved", "shared", "needed", "wanted", "bought",
          "sold"]  # fmt: skip
_OBJECTS = ["a red umbrella", "the broken window", "three letters", "an empty box", "the final report",
            "a long table", "the garden gate", "two tickets", "the weather forecast", "a new bicycle",
            "the morning train", "several books", "the blue door", "a warm jacket", "the kitchen sink",
            "a map of the town", "the price list", "a bag of rice", "the library card",
            "an old photograph"]  # fmt: skip
_PLACES = ["near the station", "in the park", "at the market", "before lunch", "after school", "on Monday",
           "during the storm", "at the end of the street", "in the morning", "last weekend", "by the lake",
           "in the afternoon", "at home", "on the second floor", "next to the bank", "before the meeting"]  # fmt: skip
_CLAUSES = ["because it was raining", "although nobody asked", "while the others waited", "so that everyone could see",
            "when the bell rang", "since the shop was closed", "and then went home", "but forgot the keys",
            "as the sun went down", "which surprised everyone", "before anyone noticed", "and smiled"]  # fmt: skip
_QUESTIONS = ["What time does the train leave?", "Can you help me with this problem?", "How far is the airport?",
              "Which answer is correct?", "Why did the price go up?", "Where should we meet tomorrow?",
              "How many people will come?", "Is the store open on Sunday?", "Could you explain the last step?",
              "What is the weather like today?", "Do you know the total cost?", "Who wrote this book?"]  # fmt: skip


def _words(text: str) -> list[str]:
    return text.split()


_ADJECTIVES = _words("""small large quiet noisy bright dark early late simple careful green yellow heavy light
    strong weak happy tired busy empty full cheap expensive modern ancient local foreign public private warm cold
    fresh clean dirty narrow wide short tall quick slow gentle brave famous strange useful important difficult easy
    friendly helpful honest polite popular safe dangerous wooden golden silver digital electric national""")
_NOUNS = _words("""apple engine window garden kitchen village mountain island river forest valley desert ocean bridge
    tower castle market factory office library hospital school station airport harbor stadium theater museum church
    farmer teacher doctor nurse driver pilot sailor soldier painter writer singer dancer lawyer banker student
    customer manager worker neighbor stranger visitor traveler scientist engineer author reader player coach
    computer keyboard printer camera phone battery cable screen program system network server database message
    letter package envelope ticket receipt invoice contract document report schedule calendar meeting project
    budget salary payment account balance question answer problem solution example lesson chapter story poem
    picture painting song movie concert festival holiday birthday wedding dinner breakfast lunch sandwich coffee
    water bread cheese butter sugar salt pepper vegetable potato tomato carrot onion orange banana lemon cherry
    horse rabbit turtle monkey elephant tiger lion eagle parrot dolphin whale spider insect flower tree grass
    stone metal glass paper plastic cotton leather wool silk gold silver iron copper weather season summer winter
    spring autumn morning evening night minute hour month year century language country government policy
    economy industry science history music sport health family friend child parent brother sister daughter son""")
_ACTION_VERBS = _words("""finds paints opens carries visits describes repairs cleans counts orders measures watches
    follows explains answers borrows delivers checks plants discovers writes builds moves shares needs wants buys sells
    reads sends receives prepares cooks washes fixes tests compares chooses collects prints signs books cancels
    updates installs downloads uploads searches reviews approves rejects improves protects""")


def english_sentences(rng: random.Random, n: int) -> list[str]:
    """`n` short generic English sentences and questions."""
    sentences = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.15:
            sentences.append(rng.choice(_QUESTIONS))
            continue
        if roll < 0.6:
            a, b = rng.sample(_NOUNS, 2)
            sentence = (
                f"The {rng.choice(_ADJECTIVES)} {a} {rng.choice(_ACTION_VERBS)} "
                f"{rng.choice(['a', 'the', 'every', 'one'])} {rng.choice(_ADJECTIVES)} {b} {rng.choice(_PLACES)}"
            )
            sentences.append(sentence + rng.choice([".", "!", ", and that is all."]))
            continue
        sentence = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_PLACES)}"
        if rng.random() < 0.5:
            sentence += f" {rng.choice(_CLAUSES)}"
        sentences.append(sentence + ".")
    return sentences


_CITIES = ["Paris", "Tokyo", "Lima", "Cairo", "Oslo", "Denver", "Madrid", "Seoul", "Nairobi", "Toronto", "Berlin"]
_TOOLS: list[dict[str, Any]] = [
    {"name": "get_weather", "description": "Get the current weather for a city.",
     "parameters": {"city": ("string", "The city name."), "unit": ("string", "celsius or fahrenheit.")}},
    {"name": "search_flights", "description": "Search flights between two cities on a date.",
     "parameters": {"origin": ("string", "Departure city."), "destination": ("string", "Arrival city."),
                    "date": ("string", "Date as YYYY-MM-DD.")}},
    {"name": "calculate", "description": "Evaluate an arithmetic expression.",
     "parameters": {"expression": ("string", "The expression to evaluate.")}},
    {"name": "convert_currency", "description": "Convert an amount from one currency to another.",
     "parameters": {"amount": ("number", "The amount."), "from_currency": ("string", "Source currency code."),
                    "to_currency": ("string", "Target currency code.")}},
    {"name": "send_email", "description": "Send an email message.",
     "parameters": {"to": ("string", "Recipient address."), "subject": ("string", "Subject line."),
                    "body": ("string", "Message text.")}},
    {"name": "get_stock_price", "description": "Get the latest price of a stock.",
     "parameters": {"symbol": ("string", "Ticker symbol.")}},
    {"name": "set_reminder", "description": "Set a reminder at a time.",
     "parameters": {"text": ("string", "What to remember."), "minutes": ("integer", "Minutes from now.")}},
    {"name": "find_restaurants", "description": "Find restaurants in a city.",
     "parameters": {"city": ("string", "The city name."), "cuisine": ("string", "Type of food."),
                    "max_results": ("integer", "How many results to return.")}},
]  # fmt: skip


def _tool_schema(tool: dict[str, Any]) -> dict[str, Any]:
    properties = {name: {"type": kind, "description": text} for name, (kind, text) in tool["parameters"].items()}
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool["description"],
            "parameters": {"type": "object", "properties": properties, "required": list(properties)},
        },
    }


def _argument_value(rng: random.Random, name: str, kind: str) -> Any:
    if kind == "integer":
        return rng.randint(1, 60)
    if kind == "number":
        return round(rng.uniform(1, 500), rng.choice([0, 2]))
    if name in ("city", "origin", "destination"):
        return rng.choice(_CITIES)
    if name == "date":
        return f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if name in ("from_currency", "to_currency"):
        return rng.choice(["USD", "EUR", "JPY", "GBP", "CAD"])
    if name == "unit":
        return rng.choice(["celsius", "fahrenheit"])
    if name == "symbol":
        return rng.choice(["ACME", "GLOBX", "INITECH", "UMBR"])
    if name == "expression":
        return f"{rng.randint(2, 99)} * {rng.randint(2, 99)} + {rng.randint(1, 9)}"
    if name == "to":
        return f"{rng.choice(['ana', 'bo', 'cy', 'dee'])}@example.com"
    return english_sentences(rng, 1)[0]


def tool_conversations(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """`n` tool-calling conversations (`{"messages", "tools"}`): a request, an assistant tool call, the tool's JSON
    response and a final answer."""
    conversations = []
    for _ in range(n):
        offered = rng.sample(_TOOLS, rng.randint(1, 3))
        tool = rng.choice(offered)
        arguments = {name: _argument_value(rng, name, kind) for name, (kind, _) in tool["parameters"].items()}
        response = {"status": "ok", "result": rng.choice([rng.randint(0, 999), rng.choice(_CITIES), "done"])}
        messages = [
            {"role": "user", "content": f"{tool['description']} {rng.choice(_QUESTIONS)}"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": tool["name"], "arguments": arguments}}]},
            {"role": "tool", "name": tool["name"], "content": json.dumps(response)},
            {"role": "assistant", "content": f"The result is {response['result']}."},
        ]  # fmt: skip
        conversations.append({"messages": messages, "tools": [_tool_schema(t) for t in offered]})
    return conversations


def read_jsonl_texts(data_dir: Path) -> list[str]:
    """Every string field of every row of every `*.jsonl` under `data_dir`, in sorted file order."""
    texts = []
    for path in sorted(Path(data_dir).rglob("*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                texts.extend(value for value in json.loads(line).values() if isinstance(value, str))
    return texts


def tokenizer_corpus(data_dir: Path, seed: int = 0) -> list[str]:
    """The tokenizer's training text: the math data, the same questions and answers rendered as chats with the Qwen3
    template, tool-calling conversations rendered with their tool schemas, and generic English."""
    rng = random.Random(seed)
    math_texts = read_jsonl_texts(data_dir)
    # An untrained tokenizer is enough to render chat templates as text.
    renderer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), chat_template=qwen3_chat_template)
    chats = [
        [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        for question, answer in zip(math_texts[0::2], math_texts[1::2])
    ]
    rendered = [renderer.apply_chat_template(chat, tokenize=False) for chat in chats]
    rendered += [
        renderer.apply_chat_template(c["messages"], tools=c["tools"], tokenize=False)
        for c in tool_conversations(rng, 600)
    ]
    return math_texts + rendered + english_sentences(rng, 4000)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train the tiny tokenizer and build the tiny random Qwen3 model.")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="math data whose text trains the BPE")
    parser.add_argument("--vocab-size", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    for name, value in TINY_SIZES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=value)
    args = parser.parse_args(argv)

    tokenizer = train_tokenizer(tokenizer_corpus(args.data_dir, args.seed), args.vocab_size)
    model = build_tiny_qwen3(tokenizer, seed=args.seed, **{name: getattr(args, name) for name in TINY_SIZES})
    args.output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(args.output_dir)
    model.save_pretrained(args.output_dir)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"wrote {args.output_dir}: vocab {len(tokenizer)}, {n_params:,} parameters")
