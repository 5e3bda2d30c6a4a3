"""What GEAR costs over GRPO, next to TRL's own self-distillation trainer (SDPO).

One process builds every trainer once on the same model and the same rows, then runs training steps round-robin over
the configurations (warm-up first, then R repetitions), so machine noise falls on all of them alike:

    grpo                      TRL's GRPOTrainer
    gear/<credit>             GEARTrainer for credit none, token, turn, fixed, gear_no_entropy, gear
    sdpo/full_logits          trl.experimental.sdpo.SDPOTrainer, full-vocabulary distillation ([B, T, V] logits)
    sdpo/topk_logits          the same on the student's top-k logits
    gigpo                     gear_trl.credit.gigpo_advantages on 64 rollouts x 10 steps of string anchors

A step is what the trainers' own entry points do for one generation batch: `_generate_and_score_completions(rows)`
(SDPO: `_prepare_training_batch(rows)`) then `compute_loss(model, batch).backward()`. Generation is replaced by fixed,
pre-drawn completion ids of length T without EOS, so every trainer scores the same batch and generation time (~0) is
left out; the tiny shape also times one real HF `generate` call (`hf_generate`). Phases are timed by wrapping the
trainers' methods: rewards (`_calculate_rewards`), teacher prompts, the teacher pass (GEAR: every backbone pass it adds
plus `reverse_kl_and_entropy`, the LM head over chunks; SDPO: its no-grad `_forward_logits`), segments and weights, and
the loss (`compute_loss` + `backward`). A phase can sit inside another: SDPO's teacher forward, and GEAR's LM-head
chunks once they read the student's states from the loss's own forward, run inside `compute_loss`; the report says so.
SDPO's teacher gets the information GEAR's gets: the ground truth, as environment feedback in its reprompt
(`include_environment_feedback`, `use_successful_as_teacher=False`), with the live policy as teacher and reverse KL.

CPU runs use one torch thread (`--threads`): on 2 cores shared with other processes, a second OpenMP thread makes each
op wait at a barrier for a descheduled thread. `--gear-src DIR` benchmarks another copy of gear_trl (e.g.
`git archive <commit> gear_trl | tar -x -C DIR`) with the same harness, for before/after figures.

Memory: the extra peak of the step and of each phase over the step's start. On CPU a thread samples, at about 1 kHz,
the bytes allocated through glibc's malloc (`mallinfo2`; the RSS where that is missing): unlike the RSS it drops when a
tensor is freed even if glibc keeps the pages, so a phase reusing memory freed by an earlier one still shows its own
peak. On CUDA: `torch.cuda.max_memory_allocated`, with `reset_peak_memory_stats` at each phase boundary.

    python bench/overhead.py --quick                 # < 5 minutes on 2 CPU cores
    python bench/overhead.py --device cpu            # tiny + vocab shapes, ~15 minutes on 2 CPU cores
    python bench/overhead.py --device cuda           # Qwen3-4B-shaped model, random weights, bf16 (one H100)
    python bench/overhead.py --shape vocab --profile # where a GEAR step's time goes (cProfile + torch.profiler)

Writes `bench/results/overhead_<device>[_quick].json` and `.md`.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TINY_MODEL = REPO_ROOT / "data" / "tiny-qwen3"
MATH_DATA = REPO_ROOT / "data" / "math" / "gsm8k_style" / "train.jsonl"
RESULTS_DIR = REPO_ROOT / "bench" / "results"

GEAR_MODES = ("none", "token", "turn", "fixed", "gear_no_entropy", "gear")
NO_SHARING = "gear/gear:no_prefix_sharing"  # credit gear, `teacher_prefix_sharing: false` (the full teacher pass)
TRAINER_CONFIGS = (
    "grpo",
    *(f"gear/{mode}" for mode in GEAR_MODES),
    NO_SHARING,
    "sdpo/full_logits",
    "sdpo/topk_logits",
)
PSEUDO_CONFIGS = ("gigpo", "hf_generate")  # timed in the same round-robin, but not training steps

# Targets from the issue ("Performance and scale"); checked and reported, never tuned.
MAX_STEP_RATIO = 1.3  # GEAR step time / GRPO step time, CPU shapes
MAX_EXTRA_MEMORY_FRACTION = 0.10  # GEAR's extra peak memory / GRPO's step peak, CPU shapes
MAX_DIVERGENCE_VS_SDPO = 0.2  # GEAR divergence-pass extra memory / SDPO full_logits extra memory, vocab shape
MAX_GIGPO_FRACTION = 0.005  # GiGPO grouping + step advantages / GEAR step time
MAX_LONG_PROMPT_STEP_RATIO = 1.15  # GEAR step time / GRPO step time, long_prompt shape (issue 12)
MAX_PREFIX_SHARING_RATIO = 0.4  # teacher pass with prefix sharing / without, long_prompt shape
MAX_END_TO_END_RATIO = 1.10  # (generation + GEAR step) / (generation + GRPO step), every shape


# ---------------------------------------------------------------------------------------------------------------------
# Shapes


@dataclass
class Shape:
    """One model + batch geometry. `batch` completions per step, `num_generations` per prompt, `length` tokens each."""

    name: str
    model: str  # "tiny": data/tiny-qwen3; "vocab": small backbone, Qwen3 vocabulary; "qwen3-4b": Qwen3-4B geometry
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
            "tiny",
            batch=8,
            num_generations=8,
            length=256,
            reps=3 if quick else 12,
            warmup_length=16,
            hf_generate=True,
            prompt_tokens=2048,
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
# Memory: extra peak over a window's start, nested windows (a phase inside the step)


class _Window:
    __slots__ = ("peak", "start")

    def __init__(self, start: int):
        self.start = start
        self.peak = start


def _malloc_in_use():
    """A function returning the bytes currently allocated through glibc's malloc (in-use heap chunks + mmapped
    blocks, summed over arenas), or None off glibc. Unlike the RSS it does not keep freed heap memory, so a phase that
    reuses memory freed by an earlier one still shows its own peak; and it needs no malloc tuning that would change
    the timings."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError):
        return None

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    mallinfo2.restype = MallInfo2

    def in_use() -> int:
        info = mallinfo2()
        return info.uordblks + info.hblkhd

    return in_use


class HostMonitor:
    """Host memory sampled by a background thread (~1 kHz); every open window keeps the largest value seen. Reads
    glibc's malloc statistics (see `_malloc_in_use`), else the process RSS (psutil)."""

    def __init__(self, interval: float = 1e-3):
        self.read = _malloc_in_use()
        self.method = "bytes allocated through glibc malloc (mallinfo2: in-use heap + mmapped blocks)"
        if self.read is None:
            import psutil

            process = psutil.Process()
            self.read = lambda: process.memory_info().rss
            self.method = "process RSS (psutil)"
        self.method += f", sampled every {interval * 1e3:g} ms by a thread and at every phase boundary"
        self._interval = interval
        self._windows: list[_Window] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()

    def _sample(self) -> int:
        value = self.read()
        with self._lock:
            for window in self._windows:
                window.peak = max(window.peak, value)
        return value

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            time.sleep(self._interval)

    def open(self) -> _Window:
        window = _Window(self.read())
        with self._lock:
            self._windows.append(window)
        return window

    def close(self, window: _Window) -> None:
        self._sample()
        with self._lock:
            self._windows.remove(window)

    def shutdown(self):
        self._stop.set()
        self._thread.join()


class CUDAMonitor:
    """Allocated CUDA memory. The allocator keeps one peak counter, so it is folded into every open window and reset
    at each boundary; that lets a phase window sit inside the step window."""

    method = "torch.cuda.max_memory_allocated, peak counter folded and reset at every phase boundary"

    def __init__(self):
        import torch

        self._cuda = torch.cuda
        self._windows: list[_Window] = []

    def _fold(self):
        peak = self._cuda.max_memory_allocated()
        for window in self._windows:
            window.peak = max(window.peak, peak)
        self._cuda.reset_peak_memory_stats()

    def open(self) -> _Window:
        self._cuda.synchronize()
        self._fold()
        window = _Window(self._cuda.memory_allocated())
        self._windows.append(window)
        return window

    def close(self, window: _Window) -> None:
        self._cuda.synchronize()
        self._fold()
        self._windows.remove(window)

    def shutdown(self):
        pass


# ---------------------------------------------------------------------------------------------------------------------
# Step recorder: phase times and extra peaks; the method wrappers report to whichever recorder is active


_ACTIVE: StepRecorder | None = None


class StepRecorder:
    def __init__(self, monitor, sync):
        self.monitor = monitor
        self.sync = sync
        self.stack: list[str] = []

    @contextlib.contextmanager
    def step(self):
        global _ACTIVE
        self.times = defaultdict(float)
        self.extra = {}
        self.local = {}
        self.inside = defaultdict(set)  # phase -> the phases it ran inside
        self.sync()
        self.step_window = self.monitor.open()
        start = time.perf_counter()
        _ACTIVE = self
        try:
            yield self
        finally:
            _ACTIVE = None
            self.sync()
            self.times["step"] = time.perf_counter() - start
            self.monitor.close(self.step_window)
            self.extra["step"] = self.step_window.peak - self.step_window.start

    @contextlib.contextmanager
    def phase(self, name: str):
        self.sync()
        window = self.monitor.open()
        self.inside[name].update(self.stack)
        self.stack.append(name)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.sync()
            self.times[name] += time.perf_counter() - start
            self.stack.pop()
            self.monitor.close(window)
            self.extra[name] = max(self.extra.get(name, 0), window.peak - self.step_window.start)
            self.local[name] = max(self.local.get(name, 0), window.peak - window.start)


def _wrap(owner, attr: str, phase, *, skip_inside: tuple[str, ...] = ()):
    """Replace `owner.attr` (an instance's method or a module's function) by a version timed as `phase`: a name, a
    tuple of names (nested phases), or a callable returning either or None (this call is not timed). A phase already
    open is not reopened (its time is not counted twice). Missing attributes are left alone, so the benchmark keeps
    running while gear_trl's internals change."""
    original = getattr(owner, attr, None)
    if original is None or getattr(original, "_bench_wrapped", False):
        return

    @functools.wraps(original)
    def timed(*args, **kwargs):
        recorder = _ACTIVE
        names = phase() if callable(phase) else phase
        if recorder is None or names is None or any(s in recorder.stack for s in skip_inside):
            return original(*args, **kwargs)
        names = (names,) if isinstance(names, str) else names
        with contextlib.ExitStack() as stack:
            for name in names:
                if name not in recorder.stack:
                    stack.enter_context(recorder.phase(name))
            return original(*args, **kwargs)

    timed._bench_wrapped = True
    setattr(owner, attr, timed)


def _no_grad_only(name):
    import torch

    return lambda: None if torch.is_grad_enabled() else name


def _instrument_gear_module():
    """GEAR's pure functions, looked up by the trainer module at call time."""
    import gear_trl.trainer as gear_module

    _wrap(gear_module, "reverse_kl_and_entropy", ("teacher", "teacher_lm_head"))
    _wrap(gear_module, "segment_signal", "segments")
    _wrap(gear_module, "weights_from_signal", "weights")


def _instrument(trainer, kind: str):
    _wrap(trainer, "_calculate_rewards", "rewards")
    if kind == "sdpo":
        _wrap(trainer, "_generate", "generate")
        _wrap(trainer.teacher_context_builder, "build", "teacher_prompts")
        _wrap(trainer, "_compute_rollout_logps", "old_logps")
        # The teacher forward is the no-grad `_forward_logits` call inside compute_loss.
        _wrap(trainer, "_forward_logits", _no_grad_only("teacher"), skip_inside=("old_logps",))
        _wrap(trainer, "_compute_self_distillation_loss", "distill_loss")
        return
    _wrap(trainer, "_generate_single_turn", "generate")
    # GRPO's own no-grad pass (num_iterations > 1); the loss's pass runs with grad.
    _wrap(trainer, "_get_per_token_logps_and_entropies", _no_grad_only("old_logps"), skip_inside=("teacher",))
    if kind == "gear":
        # "teacher" is GEAR's whole divergence pass: the student and teacher backbones (as many as the trainer runs)
        # and the LM head over chunks. Names of the trainer at 8a24c5d (`_divergence`) and of later versions.
        for method in ("_divergence", "_teacher_hidden", "_student_hidden_pass"):
            _wrap(trainer, method, "teacher")
        _wrap(trainer, "_final_hidden", ("teacher", "teacher_backbone"))
        _wrap(trainer, "_backbone_states", ("teacher", "teacher_backbone"))
        _wrap(trainer, "_teacher_prompts", "teacher_prompts")


# ---------------------------------------------------------------------------------------------------------------------
# Model, data, trainers


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

    from gear_trl.config import DEFAULT_MATH_TEACHER_TEMPLATE
    from gear_trl.data import prepare_dataset

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


def token_parity(completion_ids, **kwargs):
    """A cheap reward that varies between completions, so advantages (and SDPO/GEAR weights) are not all zero."""
    return [sum(i % 2 for i in ids) / max(len(ids), 1) for ids in completion_ids]


def make_trainer(name: str, model, tokenizer, dataset, shape: Shape, opts, output_dir: str):
    from trl import GRPOConfig, GRPOTrainer
    from trl.experimental.sdpo import SDPOConfig, SDPOTrainer

    from gear_trl import GEARConfig, GEARTrainer
    from gear_trl.rewards import get_reward_funcs

    cuda = opts.device == "cuda"
    common = {
        "output_dir": output_dir,
        "per_device_train_batch_size": shape.batch,
        "num_generations": shape.num_generations,
        "max_completion_length": shape.length,
        "gradient_accumulation_steps": 1,
        "num_iterations": opts.num_iterations,
        "beta": 0.0,
        "temperature": 1.0,
        "learning_rate": 1e-6,
        "use_cpu": not cuda,
        "bf16": cuda,
        "gradient_checkpointing": cuda,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "seed": opts.seed,
    }
    reward_funcs = [*get_reward_funcs(["accuracy", "format"]), token_parity]
    if not name.startswith("sdpo/"):
        # GRPO and GEAR patch the model's forward (TRL's fused LM head; SDPO does not). Start from the model's own
        # forward so the patches do not nest; they are identical (same temperature), so the last one serves all.
        model.__dict__.pop("forward", None)
    if name == "grpo":
        kind, cls, args = "grpo", GRPOTrainer, GRPOConfig(**common)
    elif name.startswith("gear/"):
        credit, _, variant = name.split("/", 1)[1].partition(":")
        extra = {"teacher_prefix_sharing": False} if variant == "no_prefix_sharing" else {}
        args = GEARConfig(**common, credit=credit, divergence_chunk_size=opts.divergence_chunk_size, **extra)
        kind, cls = "gear", GEARTrainer
    elif name.startswith("sdpo/"):
        mode = name.split("/", 1)[1]
        args = SDPOConfig(
            **common,
            distillation_mode=mode,
            distillation_topk=opts.sdpo_topk if mode == "topk_logits" else None,
            distillation_alpha=1.0,  # reverse KL, as GEAR's divergence
            teacher_model_kind="live",  # GEAR's default teacher: the current policy
            use_successful_as_teacher=False,
            include_environment_feedback=True,  # the ground truth, via the rows' `privileged_context`
        )
        kind, cls = "sdpo", SDPOTrainer
    else:
        raise ValueError(name)
    trainer = cls(model=model, reward_funcs=reward_funcs, args=args, train_dataset=dataset, processing_class=tokenizer)
    # Set by Trainer.train(); the loss normalizers read it.
    trainer.current_gradient_accumulation_steps = 1
    _instrument(trainer, kind)
    return trainer, kind


def fix_generation(trainer, kind: str, completions: dict):
    """Generation returns `completions["ids"][i]` for row i: same batch for every trainer, no EOS, length T."""

    if kind == "sdpo":

        def generate(prompt_ids):
            return prompt_ids, [list(c) for c in completions["ids"][: len(prompt_ids)]]

        original = "_generate"
    else:

        def generate(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
            return [list(c) for c in completions["ids"][: len(prompt_ids)]], None

        original = "_generate_single_turn"
    setattr(trainer, original, generate)


# ---------------------------------------------------------------------------------------------------------------------
# GiGPO batch


def gigpo_batch(num_prompts=8, group_size=8, num_steps=10, seed=0):
    """64 rollouts x 10 steps: anchors are environment states (a few hundred characters of JSON) that rollouts of the
    same prompt often share at the same step, as in tool-use tasks."""
    import torch

    rng = random.Random(seed)
    anchors = []
    for prompt in range(num_prompts):
        for _ in range(group_size):
            rollout = []
            for step in range(num_steps):
                variant = rng.randrange(3)  # three reachable states per step: groups of ~2-3 rollouts each
                files = {f"file_{k}.txt": f"content {prompt}-{step}-{(variant + k) % 5} " * 3 for k in range(6)}
                rollout.append(json.dumps({"cwd": f"/home/user/p{prompt}/s{step}", "files": files}, sort_keys=True))
            anchors.append(rollout)
    rewards = torch.tensor([rng.random() for _ in anchors])
    group_ids = torch.arange(len(anchors)) // group_size
    return rewards, group_ids, anchors


def time_gigpo(batch, inner: int = 5) -> float:
    from gear_trl.credit import gigpo_advantages

    rewards, group_ids, anchors = batch
    start = time.perf_counter()
    for _ in range(inner):
        gigpo_advantages(rewards, group_ids, anchors)
    return (time.perf_counter() - start) / inner


# ---------------------------------------------------------------------------------------------------------------------
# The benchmark


def _stats(values: list[float]) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    if len(values) == 1:
        q1 = q3 = values[0]
    else:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    return {
        "median": statistics.median(values),
        "min": ordered[0],
        "q1": q1,
        "q3": q3,
        "iqr": q3 - q1,
        "n": len(values),
        "samples": list(values),  # in the order of the repetitions
    }


def _release_memory(device: str):
    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def run_step(trainer, kind: str, rows, recorder: StepRecorder, device: str, seed: int):
    import torch

    trainer.model.train()
    inputs = copy.deepcopy(rows)
    torch.manual_seed(seed)
    with recorder.step():
        with recorder.phase("prepare"):
            if kind == "sdpo":
                batch = trainer._prepare_training_batch(inputs)
            else:
                batch = trainer._generate_and_score_completions(inputs)
        with recorder.phase("loss"):
            loss = trainer.compute_loss(trainer.model, batch)
            loss.backward()
    loss_value = float(loss.detach())
    trainer.model.zero_grad(set_to_none=True)
    del batch, loss
    _release_memory(device)
    return loss_value


def benchmark_shape(shape: Shape, opts, monitor, log) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    device = opts.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    recorder = StepRecorder(monitor, sync)
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    model = build_model(shape, device)
    if device == "cuda":
        model.config.use_cache = False
    rows = build_rows(shape, tokenizer)
    dataset = Dataset.from_list(rows)
    prompt_tokens = sorted(
        len(
            tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True, return_dict=True)[
                "input_ids"
            ]
        )
        for row in rows[:: shape.num_generations]
    )
    vocab = model.config.vocab_size
    completions = {"ids": draw_completions(shape, vocab, tokenizer, shape.warmup_length, opts.seed)}
    wanted = [c for c in opts.configs if shape.configs is None or c in shape.configs]
    configs = [c for c in wanted if c in TRAINER_CONFIGS]
    pseudo = [c for c in wanted if c == "gigpo" or (c == "hf_generate" and shape.hf_generate)]

    log(
        f"\n== shape {shape.name}: model {shape.model} (vocab {vocab}, hidden {model.config.hidden_size}, "
        f"{model.config.num_hidden_layers} layers, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params), "
        f"B={shape.batch} completions ({shape.num_generations} per prompt), T={shape.length}, reps={shape.reps}"
    )
    _instrument_gear_module()
    trainers = {}
    tmp = tempfile.mkdtemp(prefix="gear-bench-")
    for name in configs:
        trainer, kind = make_trainer(
            name, model, tokenizer, dataset, shape, opts, os.path.join(tmp, name.replace("/", "-"))
        )
        fix_generation(trainer, kind, completions)
        trainers[name] = (trainer, kind)
    if device == "cuda":
        # Trainer.train() turns gradient checkpointing on; without it a 4B model's activations at B x 4096 tokens
        # would not fit. GEAR's and TRL's no-grad passes switch it off themselves.
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    gigpo_data = gigpo_batch()
    generate_prompt_ids = None
    if "hf_generate" in pseudo and "grpo" in trainers:
        grpo = trainers["grpo"][0]
        generate_prompt_ids = grpo._tokenize_prompts([row["prompt"] for row in rows])[0]
        # Real generation of the timed completions' length (EOS is blocked until then), for end-to-end ratios. The
        # trainers' own steps never call it (their generation is fixed), so only this timing sees the setting.
        grpo.generation_config.min_new_tokens = shape.length
        grpo.generation_kwargs["min_new_tokens"] = shape.length

    samples = {name: [] for name in configs + pseudo}
    gen_lengths = []
    errors = {}

    def one_round(rep: int, record: bool):
        # Rotate the order every round, so no configuration always runs right after the same neighbour.
        start = rep % len(configs) if configs else 0
        for name in configs[start:] + configs[:start]:
            if name in errors:
                continue
            trainer, kind = trainers[name]
            try:
                loss = run_step(trainer, kind, rows, recorder, device, seed=opts.seed + rep)
            except torch.OutOfMemoryError as err:  # e.g. SDPO full_logits at 4B x 4096 tokens
                errors[name] = f"out of memory: {str(err).splitlines()[0]}"
                log(f"  {name}: {errors[name]}")
                _release_memory(device)
                continue
            if record:
                samples[name].append(
                    {
                        "times": dict(recorder.times),
                        "extra": dict(recorder.extra),
                        "local": dict(recorder.local),
                        "loss": loss,
                        "inside": {p: sorted(v) for p, v in recorder.inside.items()},
                    }
                )
        if "gigpo" in pseudo:
            with recorder.step():
                seconds = time_gigpo(gigpo_data)
            if record:
                samples["gigpo"].append({"times": {"step": seconds}, "extra": {}, "local": {}})
        if "hf_generate" in pseudo and generate_prompt_ids is not None:
            from trl import GRPOTrainer

            grpo = trainers["grpo"][0]
            grpo.model.eval()
            torch.manual_seed(opts.seed + rep)
            with recorder.step():
                ids, _ = GRPOTrainer._generate_single_turn(grpo, generate_prompt_ids, None, {}, shape.num_generations)
            if record:
                gen_lengths.extend(len(c) for c in ids)
                samples["hf_generate"].append(
                    {"times": {"step": recorder.times["step"]}, "extra": {"step": recorder.extra["step"]}, "local": {}}
                )

    started = time.perf_counter()
    # Warm-up on short completions: first-call costs (lazy imports, allocator growth), not the timings.
    for rep in range(opts.warmup):
        one_round(rep=rep, record=False)
    log(f"  warm-up done in {time.perf_counter() - started:.1f}s")
    completions["ids"] = draw_completions(shape, vocab, tokenizer, shape.length, opts.seed)
    for rep in range(shape.reps):
        t0 = time.perf_counter()
        one_round(rep, record=True)
        steps = ", ".join(f"{n} {samples[n][-1]['times']['step']:.2f}s" for n in configs if samples[n])
        log(f"  rep {rep + 1}/{shape.reps} ({time.perf_counter() - t0:.0f}s): {steps}")

    results = {}
    for name in configs + pseudo:
        if name in errors:
            results[name] = {"error": errors[name]}
            continue
        runs = samples[name]
        phases = sorted({p for run in runs for p in run["times"]} - {"step"})
        results[name] = {
            "step_s": _stats([run["times"]["step"] for run in runs]),
            "phases_s": {p: _stats([run["times"].get(p, 0.0) for run in runs]) for p in phases},
            "extra_peak_mb": {
                p: statistics.median(run["extra"].get(p, 0) / 2**20 for run in runs)
                for p in sorted({p for run in runs for p in run["extra"]})
            },
            "phase_local_peak_mb": {
                p: statistics.median(run["local"].get(p, 0) / 2**20 for run in runs)
                for p in sorted({p for run in runs for p in run["local"]})
            },
        }
        if name in TRAINER_CONFIGS:
            results[name]["loss"] = runs[-1]["loss"]
            results[name]["phase_inside"] = runs[-1]["inside"]
            if opts.num_iterations > 1:
                amortized = [run["times"]["prepare"] / opts.num_iterations + run["times"]["loss"] for run in runs]
                results[name]["amortized_step_s"] = _stats(amortized)
    if gen_lengths:
        results["hf_generate"]["mean_generated_tokens"] = sum(gen_lengths) / len(gen_lengths)
    generation = results.get("hf_generate", {}).get("step_s")
    grpo = results.get("grpo", {})
    if "step_s" in grpo:
        for name, res in results.items():
            if "step_s" in res and name in TRAINER_CONFIGS:
                res["step_ratio_to_grpo"] = res["step_s"]["median"] / grpo["step_s"]["median"]
                # Interference from other processes only adds time, so the fastest repetitions are the least disturbed.
                res["step_ratio_to_grpo_min"] = res["step_s"]["min"] / grpo["step_s"]["min"]
                # Per round, against GRPO's step of the same round: less sensitive to load that drifts between rounds.
                paired = [a / b for a, b in zip(res["step_s"]["samples"], grpo["step_s"]["samples"])]
                res["step_ratio_to_grpo_paired"] = _stats(paired)
                res["phase_ratio_to_grpo"] = {
                    p: res["phases_s"][p]["median"] / grpo["phases_s"][p]["median"]
                    for p in ("prepare", "rewards", "loss")
                    if p in res["phases_s"] and grpo["phases_s"].get(p, {}).get("median")
                }
                grpo_peak = grpo["extra_peak_mb"]["step"]
                res["extra_peak_over_grpo_mb"] = res["extra_peak_mb"]["step"] - grpo_peak
                if generation and name != "grpo":
                    # Generation (same prompts, same lengths) + step, over generation + GRPO's step, per round.
                    gen = generation["samples"]
                    res["end_to_end_ratio_to_grpo_paired"] = _stats(
                        [
                            (g + a) / (g + b)
                            for g, a, b in zip(gen, res["step_s"]["samples"], grpo["step_s"]["samples"], strict=True)
                        ]
                    )
    shared, full = results.get("gear/gear", {}), results.get(NO_SHARING, {})
    if "teacher" in shared.get("phases_s", {}) and "teacher" in full.get("phases_s", {}):
        a, b = shared["phases_s"]["teacher"], full["phases_s"]["teacher"]
        shared["teacher_ratio_to_no_prefix_sharing"] = a["median"] / b["median"]
        shared["teacher_ratio_to_no_prefix_sharing_paired"] = _stats(
            [x / y for x, y in zip(a["samples"], b["samples"], strict=True)]
        )
    n_params = sum(p.numel() for p in model.parameters())
    trainers.clear()
    del model
    _release_memory(device)
    return {
        "shape": asdict(shape),
        "model": {"vocab_size": vocab, "parameters": n_params},
        "prompt_tokens": prompt_tokens,
        "wall_s": time.perf_counter() - started,
        "results": results,
    }


def evaluate_targets(shapes: dict, device: str) -> list[dict]:
    targets = []

    def add(name, shape, value, threshold, holds, description):
        targets.append(
            {
                "target": name,
                "shape": shape,
                "value": value,
                "threshold": threshold,
                "holds": holds,
                "description": description,
            }
        )

    for shape_name, shape in shapes.items():
        res = shape["results"]
        grpo, gear = res.get("grpo", {}), res.get("gear/gear", {})
        if "step_s" in grpo and "step_s" in gear:
            ratio = gear["step_ratio_to_grpo"]
            limit = MAX_LONG_PROMPT_STEP_RATIO if shape_name == "long_prompt" else MAX_STEP_RATIO
            add(
                "step_time",
                shape_name,
                ratio,
                limit,
                ratio <= limit,
                "GEAR (credit gear) median step time / GRPO's (per-round paired ratio: median "
                f"{gear['step_ratio_to_grpo_paired']['median']:.2f}; "
                f"fastest reps: {gear['step_ratio_to_grpo_min']:.2f})",
            )
            grpo_peak = grpo["extra_peak_mb"]["step"]
            over = max(gear["extra_peak_mb"]["step"] - grpo_peak, 0.0)
            fraction = over / grpo_peak if grpo_peak > 0 else float("inf")
            add(
                "extra_peak_memory",
                shape_name,
                fraction,
                MAX_EXTRA_MEMORY_FRACTION,
                fraction <= MAX_EXTRA_MEMORY_FRACTION,
                "(GEAR step's extra peak - GRPO step's extra peak) / GRPO step's extra peak",
            )
            divergence = gear["extra_peak_mb"].get("teacher", 0.0)
            fraction = divergence / grpo_peak if grpo_peak > 0 else float("inf")
            add(
                "divergence_pass_memory",
                shape_name,
                fraction,
                MAX_EXTRA_MEMORY_FRACTION,
                fraction <= MAX_EXTRA_MEMORY_FRACTION,
                "stricter reading: GEAR divergence pass's extra peak (over step start) / GRPO step's extra peak",
            )
        if "end_to_end_ratio_to_grpo_paired" in gear:
            ratio = gear["end_to_end_ratio_to_grpo_paired"]["median"]
            gen = res["hf_generate"]
            add(
                "end_to_end_step_time",
                shape_name,
                ratio,
                MAX_END_TO_END_RATIO,
                ratio <= MAX_END_TO_END_RATIO,
                "(real HF generation + GEAR step) / (generation + GRPO step), median of per-round ratios; "
                f"generation {_fmt_s(gen['step_s'])} for {gen.get('mean_generated_tokens', 0):.0f} tokens per "
                "completion",
            )
        if shape_name == "long_prompt" and "teacher_ratio_to_no_prefix_sharing_paired" in gear:
            ratio = gear["teacher_ratio_to_no_prefix_sharing_paired"]["median"]
            full = res[NO_SHARING]["phases_s"]["teacher"]
            add(
                "teacher_prefix_sharing",
                shape_name,
                ratio,
                MAX_PREFIX_SHARING_RATIO,
                ratio <= MAX_PREFIX_SHARING_RATIO,
                "GEAR teacher pass with prefix sharing / without (`teacher_prefix_sharing: false`), median of "
                f"per-round ratios; {_fmt_s(gear['phases_s']['teacher'])} vs {_fmt_s(full)}",
            )
        sdpo = res.get("sdpo/full_logits", {})
        if shape_name != "tiny" and "step_s" in gear and "extra_peak_mb" in sdpo:
            divergence = gear["extra_peak_mb"].get("teacher", 0.0)
            sdpo_peak = sdpo["extra_peak_mb"]["step"]
            fraction = divergence / sdpo_peak if sdpo_peak > 0 else float("inf")
            add(
                "divergence_vs_sdpo_full_logits",
                shape_name,
                fraction,
                MAX_DIVERGENCE_VS_SDPO,
                fraction <= MAX_DIVERGENCE_VS_SDPO,
                "GEAR divergence pass's extra peak / SDPO full_logits step's extra peak",
            )
        gigpo = res.get("gigpo", {})
        if "step_s" in gigpo and "step_s" in gear:
            fraction = gigpo["step_s"]["median"] / gear["step_s"]["median"]
            add(
                "gigpo_fraction",
                shape_name,
                fraction,
                MAX_GIGPO_FRACTION,
                fraction < MAX_GIGPO_FRACTION,
                "gigpo_advantages on 64 rollouts x 10 steps / GEAR step time",
            )
    return targets


# ---------------------------------------------------------------------------------------------------------------------
# Report


def _fmt_s(stats: dict | None) -> str:
    if not stats:
        return "-"
    median = stats["median"]
    unit, scale = ("ms", 1e3) if median < 1 else ("s", 1.0)
    return f"{median * scale:.3g} {unit}"


def _fmt_mb(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.2f} GB" if abs(value) >= 1024 else f"{value:.0f} MB"


def _fmt_lengths(lengths) -> str:
    if not lengths:
        return "?"
    return f"{lengths[0]}" if lengths[0] == lengths[-1] else f"{lengths[0]}-{lengths[-1]}"


def shape_table(shape: dict) -> list[str]:
    res = shape["results"]
    s = shape["shape"]
    title = (
        f"**{s['name']}** ({s['model']}, vocab {shape['model']['vocab_size']:,}; B={s['batch']} completions, "
        f"T={s['length']} tokens; prompts of {_fmt_lengths(shape.get('prompt_tokens'))} tokens; median of "
        f"{s['reps']} interleaved reps)"
    )
    header = (
        "| configuration | step (IQR) | x GRPO | x GRPO, fastest reps | rewards | teacher pass | segments+weights "
        "| loss fwd+bwd | step extra peak | teacher-pass extra peak |"
    )
    lines = [title, "", header, "|---|---|---|---|---|---|---|---|---|---|"]
    for name in TRAINER_CONFIGS:
        r = res.get(name)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {name} | {r['error']} | | | | | | | | |")
            continue
        ph = r["phases_s"]
        seg = None
        if "segments" in ph or "weights" in ph:
            seg = {"median": ph.get("segments", {}).get("median", 0) + ph.get("weights", {}).get("median", 0)}
        teacher = _fmt_s(ph.get("teacher"))
        inside = r.get("phase_inside", {}).get("teacher", [])
        if "loss" in inside:
            teacher += " (partly in loss)" if "prepare" in inside else " (in loss)"
        step = r["step_s"]
        iqr = f"{_fmt_s(step)} ({_fmt_s({'median': step['iqr']})})"
        lines.append(
            f"| {name} | {iqr} | {r.get('step_ratio_to_grpo', float('nan')):.2f} "
            f"| {r.get('step_ratio_to_grpo_min', float('nan')):.2f} | {_fmt_s(ph.get('rewards'))} "
            f"| {teacher} | {_fmt_s(seg)} | {_fmt_s(ph.get('loss'))} "
            f"| {_fmt_mb(r['extra_peak_mb'].get('step'))} | {_fmt_mb(r['extra_peak_mb'].get('teacher'))} |"
        )
    for name in PSEUDO_CONFIGS:
        r = res.get(name)
        if r and "step_s" in r:
            note = ""
            if name == "gigpo":
                note = "gigpo_advantages, 64 rollouts x 10 steps"
            if name == "hf_generate":
                note = f"real HF generate, mean {r.get('mean_generated_tokens', 0):.0f} tokens"
            lines.append(f"| {name} ({note}) | {_fmt_s(r['step_s'])} | | | | | | | | |")
    return lines


def markdown_report(report: dict) -> str:
    meta = report["meta"]
    setup = (
        f"`python bench/overhead.py {' '.join(meta['argv'])}` on {meta['machine']}; torch {meta['torch']}, "
        f"transformers {meta['transformers']}, trl {meta['trl']}; num_iterations={meta['num_iterations']}, "
        f"divergence_chunk_size={meta['divergence_chunk_size']}, SDPO top-k={meta['sdpo_topk']}. "
        "Same rows and the same fixed completions (no EOS) through every trainer, configurations interleaved "
        "round-robin; generation is excluded. Memory: extra peak over the step's start "
        f"({meta['memory_method']})."
    )
    columns = (
        "Columns: step = prepare (`_generate_and_score_completions`, SDPO `_prepare_training_batch`) + loss "
        "(`compute_loss` + `backward`), median (IQR); x GRPO: ratio of medians, and of the fastest repetitions "
        "(other processes only add time, so those are the least disturbed); teacher pass = GEAR's added backbone "
        "passes and LM-head chunks, "
        'SDPO\'s no-grad teacher forward, "(in loss)" when it runs inside `compute_loss` (then the loss column '
        "includes it, or that part of it); extra peaks are over the step's start (the teacher pass's is its peak "
        "during that pass)."
    )
    title = f"# GEAR overhead vs GRPO and SDPO ({meta['device']})"
    lines = [title, "", setup, "", f"gear_trl: {_source_line(meta)}.", "", columns, ""]
    for shape in report["shapes"].values():
        lines += shape_table(shape) + [""]
    lines += ["| target | shape | value | threshold | holds |", "|---|---|---|---|---|"]
    for t in report["targets"]:
        lines.append(
            f"| {t['description']} | {t['shape']} | {t['value']:.3g} | {t['threshold']:g} "
            f"| {'yes' if t['holds'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


def _source_line(meta: dict) -> str:
    source = meta.get("gear_trl", {})
    if source.get("label"):
        return source["label"]
    changes = source.get("uncommitted_changes")
    dirty = f" plus uncommitted changes ({', '.join(changes)})" if changes else ""
    return f"the repository at {meta.get('commit')}{dirty}"


def print_report(report: dict, log):
    log("")
    log(markdown_report(report))


def readme_table(report: dict) -> str:
    """The README's performance table and targets, from a report (`--readme-table PATH`)."""
    shapes = report["shapes"]

    def cell(shape: dict, key: str) -> str:
        res, s = shape["results"], shape["shape"]
        grpo, gear, full = res.get("grpo", {}), res.get("gear/gear", {}), res.get(NO_SHARING, {})
        gen, sdpo, gigpo = res.get("hf_generate", {}), res.get("sdpo/full_logits", {}), res.get("gigpo", {})
        if key == "shape":
            return (
                f"{s['model']}, V={shape['model']['vocab_size']:,}, prompt {_fmt_lengths(shape.get('prompt_tokens'))}"
                f" + completion {s['length']} tokens, {s['batch']} completions ({s['num_generations']} per prompt)"
            )
        if key == "grpo":
            return _fmt_s(grpo.get("step_s"))
        if key == "gear":
            if "step_s" not in gear:
                return "-"
            paired = gear["step_ratio_to_grpo_paired"]["median"]
            return f"{_fmt_s(gear['step_s'])}, **{gear['step_ratio_to_grpo']:.2f}x** (paired {paired:.2f}x)"
        if key == "teacher":
            if "teacher" not in gear.get("phases_s", {}):
                return "-"
            text = _fmt_s(gear["phases_s"]["teacher"])
            if "teacher_ratio_to_no_prefix_sharing_paired" in gear:
                ratio = gear["teacher_ratio_to_no_prefix_sharing_paired"]["median"]
                text += f"; without sharing {_fmt_s(full['phases_s']['teacher'])} (**{ratio:.2f}x**)"
            return text
        if key == "generation":
            if "step_s" not in gen:
                return "-"
            ratio = gear.get("end_to_end_ratio_to_grpo_paired", {}).get("median")
            text = f"{_fmt_s(gen['step_s'])} ({gen.get('mean_generated_tokens', 0):.0f} tokens)"
            return text + (f"; GEAR **{ratio:.3f}x** GRPO" if ratio else "")
        if key == "memory":
            if "extra_peak_mb" not in gear:
                return "-"
            return (
                f"{_fmt_mb(grpo['extra_peak_mb']['step'])} / {_fmt_mb(gear['extra_peak_mb']['step'])} / "
                f"{_fmt_mb(gear['extra_peak_mb'].get('teacher'))}"
            )
        if key == "sdpo":
            if "step_s" not in sdpo:
                return "-"
            return f"{_fmt_s(sdpo['step_s'])}, {_fmt_mb(sdpo['extra_peak_mb']['step'])}"
        if key == "gigpo":
            if "step_s" not in gigpo or "step_s" not in gear:
                return "-"
            return f"{_fmt_s(gigpo['step_s'])} ({gigpo['step_s']['median'] / gear['step_s']['median']:.2%} of a step)"
        raise KeyError(key)

    rows = [
        ("shape", "| shape |"),
        ("grpo", "| GRPO step |"),
        ("gear", "| GEAR step (`credit: gear`), x GRPO |"),
        ("teacher", "| GEAR teacher pass (teacher backbone + chunked LM head), x without prefix sharing |"),
        ("generation", "| real HF generation of the same lengths; (generation + step) x GRPO's |"),
        ("memory", "| extra peak memory: GRPO step / GEAR step / GEAR teacher pass |"),
        ("sdpo", "| SDPO `full_logits` step, extra peak |"),
        ("gigpo", "| GiGPO grouping (64 rollouts x 10 steps) |"),
    ]
    names = list(shapes)
    lines = ["| |" + "".join(f" {n} |" for n in names), "|---|" + "---|" * len(names)]
    lines += [label + "".join(f" {cell(shapes[n], key)} |" for n in names) for key, label in rows]
    lines += ["", "| target | shape | value | threshold | holds |", "|---|---|---|---|---|"]
    for t in report["targets"]:
        lines.append(
            f"| `{t['target']}` | {t['shape']} | {t['value']:.3g} | {t['threshold']:g} | "
            f"{'yes' if t['holds'] else '**no**'} |"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------------
# Profile (NOTES.md): where a GEAR step's time goes


def profile_shape(shape: Shape, opts, log) -> str:
    import cProfile
    import io
    import pstats

    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    model = build_model(shape, opts.device)
    rows = build_rows(shape, tokenizer)
    monitor = CUDAMonitor() if opts.device == "cuda" else HostMonitor()
    recorder = StepRecorder(monitor, torch.cuda.synchronize if opts.device == "cuda" else (lambda: None))
    _instrument_gear_module()
    out = []
    for name in opts.configs:
        if name not in TRAINER_CONFIGS or (shape.configs is not None and name not in shape.configs):
            continue
        trainer, kind = make_trainer(name, model, tokenizer, Dataset.from_list(rows), shape, opts, tempfile.mkdtemp())
        completions = {"ids": draw_completions(shape, model.config.vocab_size, tokenizer, shape.warmup_length, 0)}
        fix_generation(trainer, kind, completions)
        run_step(trainer, kind, rows, recorder, opts.device, seed=0)  # warm-up
        completions["ids"] = draw_completions(shape, model.config.vocab_size, tokenizer, shape.length, 0)
        run_step(trainer, kind, rows, recorder, opts.device, seed=0)
        phases = ", ".join(f"{p} {t:.3f}s" for p, t in sorted(recorder.times.items(), key=lambda kv: -kv[1]))
        out.append(f"## {name} at shape {shape.name} (B={shape.batch}, T={shape.length})\n\nphases: {phases}\n")

        profiler = cProfile.Profile()
        profiler.enable()
        run_step(trainer, kind, rows, recorder, opts.device, seed=0)
        profiler.disable()
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(30)
        out.append("### cProfile, top 30 by own time\n\n```\n" + _trim_pstats(stream.getvalue()) + "```\n")

        activities = [torch.profiler.ProfilerActivity.CPU]
        if opts.device == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as prof:
            run_step(trainer, kind, rows, recorder, opts.device, seed=0)
        sort = "self_cuda_time_total" if opts.device == "cuda" else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=sort, row_limit=25, max_name_column_width=60)
        out.append("### torch.profiler, top 25 ops by self time\n\n```\n" + table + "\n```\n")
        log(out[-3])
        del trainer
        _release_memory(opts.device)
    monitor.shutdown()
    return "\n".join(out)


def _trim_pstats(text: str) -> str:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return (
        "\n".join(line.replace(str(REPO_ROOT) + "/", "").replace(sys.prefix, "<py>") for line in lines[start:]) + "\n"
    )


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


# ---------------------------------------------------------------------------------------------------------------------
# CLI


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--shape",
        choices=["tiny", "long_prompt", "vocab", "qwen3-4b", "all"],
        default=None,
        help="default: tiny + long_prompt + vocab on cpu, qwen3-4b on cuda",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer reps, shorter completions (< 5 min on 2 CPU cores)"
    )
    parser.add_argument("--reps", type=int, default=None, help="measured repetitions per configuration")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds (short completions, not recorded)")
    parser.add_argument("--batch", type=int, default=None, help="completions per step B")
    parser.add_argument("--num-generations", type=int, default=None)
    parser.add_argument("--completion-length", type=int, default=None, help="T")
    parser.add_argument("--num-iterations", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=None, help="prompt length of the long_prompt shape")
    parser.add_argument(
        "--divergence-chunk-size", type=int, default=None, help="default: GEARConfig's divergence_chunk_size"
    )
    parser.add_argument("--sdpo-topk", type=int, default=20, help="SDPO distillation_topk (GEAR's divergence_top_k)")
    parser.add_argument(
        "--configs",
        default=",".join(TRAINER_CONFIGS + PSEUDO_CONFIGS),
        help="comma-separated subset of " + ", ".join(TRAINER_CONFIGS + PSEUDO_CONFIGS),
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=str(RESULTS_DIR))
    parser.add_argument("--tag", default=None, help="suffix of the output files (default: 'quick' with --quick)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: 1 on cpu, see `_meta`; torch's default on cuda)",
    )
    parser.add_argument(
        "--gear-src",
        default=None,
        help="import gear_trl from this directory instead of the repository (e.g. an exported earlier "
        "commit, for before/after figures)",
    )
    parser.add_argument("--gear-src-label", default=None, help="what --gear-src holds, for the report")
    parser.add_argument("--profile", action="store_true", help="profile one step per configuration instead")
    parser.add_argument("--dry-run", action="store_true", help="print the shapes and model geometry, run nothing")
    parser.add_argument(
        "--readme-table", default=None, metavar="JSON", help="print the README's performance table from a report"
    )
    args = parser.parse_args(argv)
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = set(args.configs) - set(TRAINER_CONFIGS + PSEUDO_CONFIGS)
    if unknown:
        parser.error(f"unknown configurations {sorted(unknown)}")
    return args


def _use_gear_src(path: str) -> None:
    source = Path(path).resolve()
    if not (source / "gear_trl" / "__init__.py").exists():
        raise SystemExit(f"--gear-src {path}: no gear_trl package there")
    loaded = sys.modules.get("gear_trl")
    if loaded is not None and Path(loaded.__file__).resolve().parent.parent != source:
        raise SystemExit(f"--gear-src {path}: gear_trl is already imported from {loaded.__file__}")
    sys.path.insert(0, str(source))


def _gear_source(args) -> dict:
    import gear_trl

    package = Path(gear_trl.__file__).resolve().parent
    info = {"path": str(package), "label": args.gear_src_label}
    if package.parent == REPO_ROOT:
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "gear_trl"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        info["uncommitted_changes"] = [line[3:] for line in status.splitlines()]
    return info


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def _meta(args, argv, monitor) -> dict:
    import torch
    import transformers
    import trl

    commit = _git_commit()
    if args.device == "cuda":
        machine = torch.cuda.get_device_name()
    else:
        cpu = platform.processor() or platform.machine()
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        machine = f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
    return {
        "device": args.device,
        "machine": machine,
        "argv": argv,
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "gear_trl": _gear_source(args),
        "threads": torch.get_num_threads(),
        "quick": args.quick,
        "warmup": args.warmup,
        "num_iterations": args.num_iterations,
        "divergence_chunk_size": args.divergence_chunk_size,
        "sdpo_topk": args.sdpo_topk,
        "memory_method": monitor.method,
        "step_definition": "prepare (_generate_and_score_completions / SDPO _prepare_training_batch; fixed "
        "generation) "
        "+ loss (compute_loss + backward), gradient_accumulation_steps=1",
        "targets": {
            "step_time_ratio_max": MAX_STEP_RATIO,
            "extra_memory_fraction_max": MAX_EXTRA_MEMORY_FRACTION,
            "divergence_vs_sdpo_full_max": MAX_DIVERGENCE_VS_SDPO,
            "gigpo_fraction_max": MAX_GIGPO_FRACTION,
            "long_prompt_step_time_ratio_max": MAX_LONG_PROMPT_STEP_RATIO,
            "teacher_prefix_sharing_ratio_max": MAX_PREFIX_SHARING_RATIO,
            "end_to_end_ratio_max": MAX_END_TO_END_RATIO,
        },
    }


def main(argv=None, log=print) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    shapes = make_shapes(args)
    if args.gear_src:
        _use_gear_src(args.gear_src)
    if args.divergence_chunk_size is None:  # the default of the gear_trl being measured
        from gear_trl.config import GEARConfig

        args.divergence_chunk_size = GEARConfig.__dataclass_fields__["divergence_chunk_size"].default
    if args.readme_table:
        text = readme_table(json.loads(Path(args.readme_table).read_text()))
        log(text)
        return {"readme_table": text}
    if args.dry_run:
        plan = [dict(asdict(s), **({} if s.model == "tiny" else describe_model(s))) for s in shapes]
        log(json.dumps(plan, indent=2))
        return {"plan": plan}

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device")
    previous_threads = torch.get_num_threads()
    # The CPU runs use one intra-op thread: on 2 shared cores, a second OpenMP thread makes every op wait at a barrier
    # for a thread the scheduler has parked behind other processes (a tiny-model step took 20x longer in a probe).
    threads = args.threads or (1 if args.device == "cpu" else None)
    if threads:
        torch.set_num_threads(threads)
    try:
        return _run(args, argv, shapes, log)
    finally:
        torch.set_num_threads(previous_threads)


def _run(args, argv, shapes, log) -> dict:
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = args.tag if args.tag is not None else ("quick" if args.quick else "")
    suffix = f"_{tag}" if tag else ""

    if args.profile:
        text = "\n".join(profile_shape(shape, args, log) for shape in shapes)
        path = out_dir / f"profile_{'_'.join(s.name for s in shapes)}_{args.device}{suffix}.md"
        source = _source_line({"gear_trl": _gear_source(args), "commit": _git_commit()})
        header = f"# Profile: `python bench/overhead.py {' '.join(argv)}`\n\ngear_trl: {source}.\n\n"
        path.write_text(header + text)
        log(f"wrote {path}")
        return {"profile": str(path)}

    monitor = CUDAMonitor() if args.device == "cuda" else HostMonitor()
    meta = _meta(args, argv, monitor)  # before the run: the repository may move on while it runs
    started = time.perf_counter()
    try:
        results = {shape.name: benchmark_shape(shape, args, monitor, log) for shape in shapes}
    finally:
        monitor.shutdown()
    for shape in shapes:
        if shape.model != "tiny":
            results[shape.name]["model"].update(describe_model(shape))
    report = {
        "meta": dict(meta, wall_s=time.perf_counter() - started),
        "shapes": results,
        "targets": evaluate_targets(results, args.device),
    }
    json_path = out_dir / f"overhead_{args.device}{suffix}.json"
    md_path = out_dir / f"overhead_{args.device}{suffix}.md"
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    md_path.write_text(markdown_report(report))
    print_report(report, log)
    log(f"wrote {json_path} and {md_path} ({report['meta']['wall_s'] / 60:.1f} min)")
    return report


if __name__ == "__main__":
    main()
