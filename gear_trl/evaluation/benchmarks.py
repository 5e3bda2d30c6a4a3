r"""The paper's benchmarks as `gear_trl.evaluate --benchmark NAME` presets: where the data are, how rows become
prompts, how completions are sampled and scored.

    python -m gear_trl.evaluate --model outputs/run --benchmark aime24      # avg@64 at temperature 0.6
    python -m gear_trl.evaluate --model outputs/run --benchmark math500 --num_samples 1 --temperature 0   # greedy

A preset only fills in the options the command line leaves out: any flag given (`--dataset` a local copy,
`--num_samples`, `--max_new_tokens`, ...) wins. The table in docs/evaluation.md is generated from `PRESETS`.

Sampling follows the chat mode the model is scored in (`Preset.sampling(mode)`; `gear_trl.evaluate` takes the mode
from the trained run's settings or `--enable_thinking`). In thinking mode it is the protocol that DeepSeek-R1 (arXiv
2501.12948, its evaluation setup) and the Qwen3 technical report (arXiv 2505.09388, thinking mode) report their math
results with: temperature 0.6, top-p 0.95, up to 32768 new tokens, and pass@1 estimated as avg@k, the mean accuracy
over k samples per problem, with k = 64 for the 30-problem AIME sets (Qwen3's 64 samples; lighteval 0.13 defines
`aime24_avg` as avg@64 too) and k = 4 for MATH-500 (R1 takes k between 4 and 64 by test-set size); GSM8K (1319
problems) and MATH (5000) use k = 1. Qwen3 also sets top-k 20 (`--top_k 20`); R1 does not, nor do the presets. In
non-thinking mode (the mode the Qwen3 recipes train in) the math presets sample with Qwen3's non-thinking settings
and fewer new tokens (`QWEN3_NON_THINKING`); the tool presets decode greedily in both modes. The GEAR paper does not
publish its evaluation protocol, so these are our choice of the common one. The prompt is R1's and Qwen's
recommended math instruction ("Please reason step by step, and put your final answer within \boxed{}.",
`gear_trl.data.math_tasks.MATH_PROMPT_TEMPLATE`), the training prompt of our math recipes; scoring is `accuracy`
(math-verify equivalence of the last `\boxed{}` with the reference answer), whose agreement with lighteval's math
metric is tested on generated cases in tests/evaluation/test_benchmarks.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..data.acebench import ACEBENCH_GITHUB
from ..inputs.errors import UserInputError

ACEBENCH_PRESETS = {
    "acebench_single_function": "normal_single_turn_single_function",
    "acebench_parallel": "normal_single_turn_parallel_function",
    "acebench_multi_adjust": "normal_multi_turn_user_adjust",
    "acebench_multi_switch": "normal_multi_turn_user_switch",
    "acebench_similar_api": "normal_similar_api",
    "acebench_preference": "normal_preference",
    "acebench_atom_bool": "normal_atom_bool",
    "acebench_atom_enum": "normal_atom_enum",
    "acebench_atom_number": "normal_atom_number",
    "acebench_atom_list": "normal_atom_list",
    "acebench_object_deep": "normal_atom_object_deep",
    "acebench_object_short": "normal_atom_object_short",
    "acebench_incomplete": "special_incomplete",
    "acebench_error_param": "special_error_param",
    "acebench_irrelevant": "special_irrelevant",
}
"""The ACEBench presets by name, each one of its non-interactive categories (the `--split`)."""

BFCL_EVAL_REQUIREMENT = "bfcl-eval==2026.3.23"
"""The bfcl-eval the BFCL presets read their tasks and checker from, installed `--no-deps` beside the `eval` extra
(`make install-eval`; docs/getting-started.md, "Install")."""

R1_PROTOCOL = "DeepSeek-R1 (arXiv 2501.12948); Qwen3 report (arXiv 2505.09388)"
QWEN3_NON_THINKING = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "max_new_tokens": 8192}
"""The math presets' sampling in non-thinking mode: Qwen3's recommended non-thinking settings (its model cards'
"Best Practices": temperature 0.7, top-p 0.8, top-k 20), and 8192 new tokens (our choice: four times the 2048 the math
recipes train with, room for a base model's longer worked answer; a completion that never stops ends 4x sooner than
at thinking mode's 32768)."""
NON_THINKING_SOURCE = "non-thinking: Qwen3 model cards' non-thinking settings, 8192 new tokens our choice"
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_new_tokens")
"""The options a preset sets per chat mode."""


@dataclass(frozen=True)
class Preset:
    """One benchmark: the dataset (Hub id, configuration, split), the adapter that reads its columns, the sampling and
    the scoring. Every field but `name`, `title`, `columns`, `source` and `notes` is the default of the `evaluate`
    option of the same name."""

    name: str
    title: str
    dataset: str
    split: str
    dataset_format: str
    columns: str
    """The columns the adapter reads (question -> prompt, answer -> ground truth), for the docs."""
    dataset_config: str | None = None
    reward: tuple[str, ...] | None = None
    """None: the adapter's task reward (`accuracy` for math)."""
    environment: str | None = None
    num_samples: int = 1
    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 0
    max_new_tokens: int = 32768
    """`temperature`, `top_p`, `top_k` (0: off) and `max_new_tokens` are the thinking-mode sampling (and that of a
    chat template without a thinking switch)."""
    non_thinking: dict = field(default_factory=dict)
    """What the sampling is in non-thinking mode, where it differs (keys of `SAMPLING_KEYS`)."""
    max_tool_calling_iterations: int | None = None
    source: str = R1_PROTOCOL
    """Where the sampling protocol comes from."""
    notes: str = ""
    extra: dict = field(default_factory=dict)

    def sampling(self, mode: str | None = "thinking") -> dict:
        """The sampling options (`SAMPLING_KEYS`) of a run in chat mode `mode` ("thinking", "non-thinking", or None
        for a template without the switch, which gets the thinking ones)."""
        values = {key: getattr(self, key) for key in SAMPLING_KEYS}
        return {**values, **self.non_thinking} if mode == "non-thinking" else values

    def defaults(self) -> dict:
        """The `evaluate` options this preset sets other than the sampling ones (`sampling`), by argparse
        destination."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "dataset_config": self.dataset_config,
            "dataset_format": self.dataset_format,
            "reward": list(self.reward) if self.reward else None,
            "environment": self.environment,
            "num_samples": self.num_samples,
            "max_tool_calling_iterations": self.max_tool_calling_iterations,
        }


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="math500",
            non_thinking=QWEN3_NON_THINKING,
            source=f"{R1_PROTOCOL}; {NON_THINKING_SOURCE}",
            title="MATH-500",
            dataset="HuggingFaceH4/MATH-500",
            split="test",
            dataset_format="aime",
            columns="problem -> prompt; answer -> ground truth (solution kept as reference)",
            num_samples=4,
            notes="the 500-problem subset of MATH from Lightman et al. 2023 (lighteval `math_500`)",
        ),
        Preset(
            name="math",
            non_thinking=QWEN3_NON_THINKING,
            source=f"{R1_PROTOCOL}; {NON_THINKING_SOURCE}",
            title="MATH",
            dataset="DigitalLearningGmbH/MATH-lighteval",
            dataset_config="default",
            split="test",
            dataset_format="math",
            columns="problem -> prompt; last \\boxed{} of solution -> ground truth",
            notes="all 5000 test problems of Hendrycks et al. 2021, the copy lighteval's `math:*` tasks read",
        ),
        Preset(
            name="gsm8k",
            non_thinking=QWEN3_NON_THINKING,
            source=f"{R1_PROTOCOL}; {NON_THINKING_SOURCE}",
            title="GSM8K",
            dataset="openai/gsm8k",
            dataset_config="main",
            split="test",
            dataset_format="gsm8k",
            columns="question -> prompt; number after #### in answer -> ground truth",
            notes="1319 test problems (lighteval `gsm8k`)",
        ),
        Preset(
            name="aime24",
            non_thinking=QWEN3_NON_THINKING,
            source=f"{R1_PROTOCOL}; {NON_THINKING_SOURCE}",
            title="AIME24",
            dataset="HuggingFaceH4/aime_2024",
            split="train",
            dataset_format="aime",
            columns="problem -> prompt; answer -> ground truth",
            num_samples=64,
            notes="the 30 problems of AIME 2024 I and II; the set's only split is `train` (lighteval `aime24`)",
        ),
        Preset(
            name="aime25",
            non_thinking=QWEN3_NON_THINKING,
            source=f"{R1_PROTOCOL}; {NON_THINKING_SOURCE}",
            title="AIME25",
            dataset="yentinglin/aime_2025",
            split="train",
            dataset_format="aime",
            columns="problem -> prompt; answer -> ground truth",
            num_samples=64,
            notes="the 30 problems of AIME 2025 I and II; the copy lighteval's `aime25` reads",
        ),
        Preset(
            name="bfcl_multi_turn",
            title="BFCL multi-turn",
            dataset="bfcl-eval",
            split="all",
            dataset_format="bfcl_multi_turn",
            columns="the installed bfcl-eval's tasks (`--split` all or one category; `--max_samples` per category)",
            reward=("bfcl_multi_turn",),
            environment=None,
            temperature=0.0,
            top_p=1.0,
            max_new_tokens=4096,
            source="BFCL v4 (bfcl-eval 2026.3.23): temperature 0.001 (here greedy), 20 steps a turn",
            notes="base, miss_func, miss_param, long_context: 200 tasks each, BFCL's own classes and checker",
        ),
        *(
            Preset(
                name=f"bfcl_{category}",
                title=f"BFCL {category}",
                dataset="data/bfcl",
                dataset_config="single_turn",
                split=category,
                dataset_format="tool_use",
                columns="prompt, tools, possible_answer (converted from bfcl-eval by data/scripts/make_bfcl_data.py)",
                reward=("tool_call_accuracy",),
                temperature=0.0,
                top_p=1.0,
                max_new_tokens=4096,
                source="BFCL v4 (bfcl-eval 2026.3.23): temperature 0.001 (here greedy)",
                notes="non-live AST category; `tool_call_accuracy` agrees with BFCL's ast_checker "
                "(tests/rewards/test_bfcl_checker_agreement.py)",
            )
            for category in ("simple", "multiple", "parallel", "parallel_multiple")
        ),
        *(
            Preset(
                name=name,
                title=title,
                dataset="bfcl-eval",
                split=split,
                dataset_format="bfcl_single_turn",
                columns="the installed bfcl-eval's entries: question -> prompt, function -> tools (with BFCL's "
                "language hints), possible_answer -> checker"
                + (" (`--split` live or one live category; `--max_samples` per category)" if split == "live" else ""),
                reward=("bfcl_ast",),
                temperature=0.0,
                top_p=1.0,
                max_new_tokens=4096,
                source="BFCL v4 (bfcl-eval 2026.3.23): temperature 0.001 (here greedy)",
                notes=notes,
            )
            for name, title, split, notes in (
                (
                    "bfcl_live",
                    "BFCL live",
                    "live",
                    (
                        "live_simple, live_multiple, live_parallel, live_parallel_multiple (258/1053/16/24 entries): "
                        "BFCL's ast_checker; accuracy weighted by entries"
                    ),
                ),
                ("bfcl_java", "BFCL Java", "simple_java", "100 entries; ast_checker with Java's type rules"),
                (
                    "bfcl_javascript",
                    "BFCL JavaScript",
                    "simple_javascript",
                    "50 entries; ast_checker with JavaScript's type rules",
                ),
                ("bfcl_irrelevance", "BFCL irrelevance", "irrelevance", "240 entries; right when no call decodes"),
                (
                    "bfcl_live_irrelevance",
                    "BFCL live irrelevance",
                    "live_irrelevance",
                    "884 entries; right when no call decodes",
                ),
                (
                    "bfcl_live_relevance",
                    "BFCL live relevance",
                    "live_relevance",
                    "16 entries; right when a call decodes (its content is not checked)",
                ),
            )
        ),
        *(
            Preset(
                name=name,
                title=f"ACEBench {category}",
                dataset=ACEBENCH_GITHUB,
                split=category,
                dataset_format="acebench",
                columns="prompt (ACEBench's system prompt with the functions, the question), functions, ground_truth, "
                "category (converted by gear_trl.data.acebench)",
                reward=("acebench_accuracy",),
                temperature=0.0,
                top_p=1.0,
                max_new_tokens=4096,
                source="ACEBench (commit e6db74b): its local-model runner decodes greedily, 1024 new tokens (here 4096, "
                "room for a thinking model's reasoning)",
                notes="English; `acebench_accuracy` agrees with ACEBench's checker (bench/acebench_agreement.py)",
            )
            for name, category in ACEBENCH_PRESETS.items()
        ),
    )
}
"""The presets by name (`--benchmark`)."""


def get_preset(name: str) -> Preset:
    """The preset named `name` (case and `-`/`_` ignored: `MATH-500` is `math500`); UserInputError naming the known
    ones otherwise."""
    key = name.lower().replace("-", "_")
    key = {k.replace("_", ""): k for k in PRESETS}.get(key.replace("_", ""), key)
    if key not in PRESETS:
        raise UserInputError(f"Unknown --benchmark {name!r}; the presets are {', '.join(PRESETS)}.")
    return PRESETS[key]


def presets_help() -> str:
    """One line per preset, for `--help`."""
    return "\n".join(
        f"  {p.name:<24} {p.title}: {p.dataset}"
        + (f" [{p.dataset_config}]" if p.dataset_config else "")
        + f" {p.split}, "
        + (f"avg@{p.num_samples}" if p.num_samples > 1 else "1 sample")
        + (f" at T={p.temperature}" if p.temperature else " greedy")
        + (
            f" (non-thinking T={p.sampling('non-thinking')['temperature']})"
            if p.sampling("non-thinking") != p.sampling("thinking")
            else ""
        )
        for p in PRESETS.values()
    )


def _sampling_text(values: dict) -> str:
    top_k = f", top-k {values['top_k']}" if values["top_k"] else ""
    return f"T={values['temperature']}, top-p {values['top_p']}{top_k}, {values['max_new_tokens']} new tokens"


def presets_table() -> str:
    """The docs table of every preset (docs/evaluation.md carries it; a test checks it is current)."""
    lines = [
        "| `--benchmark` | benchmark | dataset (config) | split | columns | sampling | scoring | protocol |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in PRESETS.values():
        dataset = f"`{p.dataset}`" + (f" (`{p.dataset_config}`)" if p.dataset_config else "")
        avg = f"avg@{p.num_samples}" if p.num_samples > 1 else "1 sample"
        thinking, non_thinking = p.sampling("thinking"), p.sampling("non-thinking")
        sampling = f"{avg}; " + (
            _sampling_text(thinking) + " in both modes"
            if thinking == non_thinking
            else f"thinking: {_sampling_text(thinking)}; non-thinking: {_sampling_text(non_thinking)}"
        )
        if p.max_tool_calling_iterations:
            sampling += f", {p.max_tool_calling_iterations} tool rounds"
        scoring = ", ".join(f"`{r}`" for r in p.reward) if p.reward else "`accuracy`"
        if p.environment:
            scoring += f" (environment `{p.environment}`)"
        lines.append(
            f"| `{p.name}` | {p.title} | {dataset} | `{p.split}` | {p.columns} | {sampling} | {scoring} | {p.source} |"
        )
    return "\n".join(lines)
