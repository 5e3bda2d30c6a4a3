"""ACEBench's non-interactive categories as evaluation rows: read from a checkout (or its GitHub files), converted to
TRL's shape, with ACEBench's own prompts.

ACEBench (Chen et al. 2025, arXiv 2501.12851; MIT licence) is not on the Hugging Face Hub: its data live in its GitHub
repository, `data_all/data_en/data_<category>.json` (one JSON object a line: `id`, `question`, `function`, and `time`
or `profile`) with the answers in `data_all/data_en/possible_answer/`, and its prompts in
`model_inference/prompt_en.py`. A converted row is

    {"id", "category", "prompt": [system message, user message], "functions": JSON, "ground_truth": JSON,
     "dialogue": the multi-turn dialogue the row is a turn of (its id otherwise)}

the prompt built as ACEBench's inference builds it (the special categories' system prompt, the preference one with
the row's profile, the normal one with the row's time; the functions shown as Python writes the list), read from the
checkout's prompt file at conversion time (parsed, not run). `gear_trl.rewards.acebench.acebench_accuracy` scores
these rows. `data/scripts/make_acebench_data.py` writes converted rows to a folder (the local sample `data/acebench`);
`load_acebench` is what `gear_trl.evaluate --benchmark acebench_*` calls.

The presets download the pinned commit's files from GitHub on first use into a cache (`default_cache_dir`). A node
without network evaluates from that cache once it is filled: `python -m gear_trl.data.acebench [--cache-dir DIR]`
(`prepare`) downloads and checks every file where there is network; copy the folder over, or pass it as
`--dataset DIR`. Missing files on a node that cannot reach GitHub raise one error that names that command.
"""

from __future__ import annotations

import ast
import json
import os
import urllib.request
from typing import Any

from ..inputs.errors import UserInputError

NORMAL_CATEGORIES = (
    "normal_single_turn_single_function",
    "normal_single_turn_parallel_function",
    "normal_multi_turn_user_adjust",
    "normal_multi_turn_user_switch",
    "normal_similar_api",
    "normal_preference",
    "normal_atom_bool",
    "normal_atom_enum",
    "normal_atom_number",
    "normal_atom_list",
    "normal_atom_object_deep",
    "normal_atom_object_short",
)
SPECIAL_CATEGORIES = ("special_incomplete", "special_error_param", "special_irrelevant")
NON_INTERACTIVE_CATEGORIES = NORMAL_CATEGORIES + SPECIAL_CATEGORIES
"""ACEBench's categories that a single generation answers (its `agent_*` ones need a simulated user)."""

ACEBENCH_COMMIT = "e6db74b735ead22c24f27367606a9408573b848f"
"""The ACEBench commit whose files the presets download (pinned so that a score means the same data)."""
ACEBENCH_GITHUB = f"github:ACEBench/ACEBench@{ACEBENCH_COMMIT[:7]}"
"""The presets' `dataset`: ACEBench's files on GitHub at `ACEBENCH_COMMIT`, downloaded on first use."""
RAW_URL = "https://raw.githubusercontent.com/ACEBench/ACEBench/{commit}/{path}"
PROMPT_FILE = "model_inference/prompt_en.py"
DATA_DIR = "data_all/data_en"
TEMPLATES = (
    "SYSTEM_PROMPT_FOR_NORMAL_DATA_EN",
    "SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN",
    "SYSTEM_PROMPT_FOR_SPECIAL_DATA_EN",
    "USER_PROMPT_EN",
)


def is_checkout(path: str) -> bool:
    """Whether `path` is an ACEBench checkout (it has the English data folder)."""
    return os.path.isdir(os.path.join(path, DATA_DIR))


def _read_lines(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def read_category(checkout: str, category: str, limit: int | None = None) -> list[tuple[dict, dict]]:
    """(row, answer) pairs of one category of a checkout, paired by id, in file order; `limit` the first N."""
    rows = _read_lines(os.path.join(checkout, DATA_DIR, f"data_{category}.json"))
    answers = {
        a["id"]: a for a in _read_lines(os.path.join(checkout, DATA_DIR, "possible_answer", f"data_{category}.json"))
    }
    missing = [row["id"] for row in rows if row["id"] not in answers]
    if missing:
        raise UserInputError(f"ACEBench {category}: no possible answer for {missing[:3]} in {checkout!r}.")
    pairs = [(row, answers[row["id"]]) for row in rows]
    return pairs[:limit] if limit is not None else pairs


def read_templates(checkout: str) -> dict[str, str]:
    """ACEBench's English prompt templates, by name, read from the checkout's prompt file without running it."""
    path = os.path.join(checkout, PROMPT_FILE)
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in TEMPLATES:
                    found[target.id] = node.value.value
    missing = [name for name in TEMPLATES if name not in found]
    if missing:
        raise UserInputError(f"{path}: no {missing}; is this an ACEBench checkout?")
    return found


def render_prompt(row: dict, category: str, templates: dict[str, str]) -> list[dict]:
    """The system and user messages ACEBench's single-turn inference sends for `row`."""
    functions = row["function"]
    if isinstance(functions, (dict, str)):
        functions = [functions]
    if category.startswith("special"):
        system = templates["SYSTEM_PROMPT_FOR_SPECIAL_DATA_EN"].format(time=row.get("time", ""), function=functions)
    elif "preference" in category:
        system = templates["SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN"].format(
            profile=row.get("profile", ""), function=functions
        )
    else:
        system = templates["SYSTEM_PROMPT_FOR_NORMAL_DATA_EN"].format(time=row.get("time", ""), function=functions)
    user = templates["USER_PROMPT_EN"].format(question=row["question"])
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def convert_row(row: dict, answer: dict, category: str, templates: dict[str, str]) -> dict[str, Any]:
    """One ACEBench row and its answer as a converted row (see the module docstring)."""
    dialogue = row["id"].rsplit("_", 1)[0] if category.startswith("normal_multi_turn") else row["id"]
    return {
        "id": row["id"],
        "category": category,
        "dialogue": dialogue,
        "prompt": render_prompt(row, category, templates),
        "functions": json.dumps(row["function"], ensure_ascii=False),
        "ground_truth": json.dumps(answer["ground_truth"], ensure_ascii=False),
    }


def convert_category(checkout: str, category: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Every row of `category` in `checkout` (the first `limit`), converted."""
    if category not in NON_INTERACTIVE_CATEGORIES:
        raise UserInputError(
            f"ACEBench category {category!r} is not one of its non-interactive ones: {', '.join(NON_INTERACTIVE_CATEGORIES)}"
            " (the agent categories need a simulated user)."
        )
    templates = read_templates(checkout)
    return [convert_row(row, answer, category, templates) for row, answer in read_category(checkout, category, limit)]


def default_cache_dir(commit: str = ACEBENCH_COMMIT) -> str:
    """Where `download` keeps ACEBench's files: `$XDG_CACHE_HOME/gear_trl/acebench/<commit>` (`~/.cache/...`)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(cache, "gear_trl", "acebench", commit)


def _files() -> list[str]:
    """The files of a checkout the presets read: the prompt file, and each category's data and possible answers."""
    return [PROMPT_FILE] + [
        f"{DATA_DIR}/{sub}data_{category}.json"
        for category in NON_INTERACTIVE_CATEGORIES
        for sub in ("", "possible_answer/")
    ]


PREPARE_COMMAND = "python -m gear_trl.data.acebench --cache-dir {root}"
"""The command that fills the cache ahead of an offline evaluation (named by `download`'s error)."""


def download(commit: str = ACEBENCH_COMMIT, cache_dir: str | None = None, timeout: float = 30) -> str:
    """A folder laid out as an ACEBench checkout (its English non-interactive data and prompt file) at `commit`,
    downloaded from GitHub into `cache_dir` (default `default_cache_dir(commit)`) unless already there. A file that
    cannot be fetched (no network, GitHub unreachable) raises one UserInputError naming the cache folder and
    `PREPARE_COMMAND`, which fills it on a machine with network."""
    root = cache_dir or default_cache_dir(commit)
    paths = _files()
    missing = [path for path in paths if not os.path.isfile(os.path.join(root, path))]
    for path in missing:
        target = os.path.join(root, path)
        url = RAW_URL.format(commit=commit, path=path)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                content = response.read()
        except Exception as err:  # URLError, timeouts, HTTP and protocol errors alike: say what to do
            reason = (str(err).strip().splitlines() or [""])[0][:200]
            raise UserInputError(
                f"ACEBench is not on the Hugging Face Hub; its data (commit {commit[:7]}) are not cached in {root} "
                f"({len(missing)} of {len(paths)} files missing) and {url} could not be read ({type(err).__name__}: "
                f"{reason}). Run `{PREPARE_COMMAND.format(root=root)}` on a machine with network and copy that folder "
                "here (or pass it as --dataset), or pass a clone of github.com/ACEBench/ACEBench as "
                "--dataset /path/to/ACEBench."
            ) from err
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target + ".part", "wb") as handle:
            handle.write(content)
        os.replace(target + ".part", target)
    return root


def prepare(cache_dir: str | None = None, commit: str = ACEBENCH_COMMIT) -> str:
    """Download ACEBench's files at `commit` into `cache_dir` (default `default_cache_dir`) and check that every
    category converts, so that an evaluation node without network finds them there; returns the folder."""
    root = download(commit, cache_dir)
    for category in NON_INTERACTIVE_CATEGORIES:
        convert_category(root, category, limit=1)
    return root


def main(argv: list[str] | None = None) -> str:
    """`python -m gear_trl.data.acebench [--cache-dir DIR]`: `prepare`, printing where the files are."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m gear_trl.data.acebench",
        description="Download ACEBench's data at the commit the acebench_* presets pin, for evaluation offline.",
    )
    parser.add_argument(
        "--cache-dir",
        "--cache_dir",
        default=None,
        help=f"Folder to fill (default: the presets' own cache, {default_cache_dir()}; another folder is passed to "
        "evaluation as --dataset DIR).",
    )
    args = parser.parse_args(argv)
    root = prepare(args.cache_dir)
    default = os.path.abspath(root) == os.path.abspath(default_cache_dir())
    print(
        f"ACEBench (commit {ACEBENCH_COMMIT[:7]}, {len(_files())} files) is in {root}: "
        + (
            "the acebench_* presets read it from there."
            if default
            else f"pass --dataset {root} to the acebench_* presets (or copy it to {default_cache_dir()})."
        )
    )
    return root


def load_acebench(source: str, category: str, limit: int | None = None):
    """A `datasets.Dataset` of converted rows of `category` (the first `limit`) from `source`: an ACEBench checkout,
    a folder of converted rows (`<category>.jsonl`, as `data/acebench`), or `ACEBENCH_GITHUB` (`github:...@commit`,
    downloaded once)."""
    from datasets import Dataset

    if category not in NON_INTERACTIVE_CATEGORIES:
        raise UserInputError(
            f"--split {category!r} is not one of ACEBench's non-interactive categories: "
            f"{', '.join(NON_INTERACTIVE_CATEGORIES)}."
        )
    if source.startswith("github:"):
        commit = source.rsplit("@", 1)[1] if "@" in source else ACEBENCH_COMMIT
        source = download(ACEBENCH_COMMIT if ACEBENCH_COMMIT.startswith(commit) else commit)
    path = os.path.expanduser(source)
    if is_checkout(path):
        rows = convert_category(path, category, limit)
    elif os.path.isfile(os.path.join(path, f"{category}.jsonl")):
        rows = _read_lines(os.path.join(path, f"{category}.jsonl"))
        rows = rows[:limit] if limit is not None else rows
    else:
        raise UserInputError(
            f"--dataset {source!r} is neither an ACEBench checkout (no {DATA_DIR}/) nor a folder of converted rows "
            f"(no {category}.jsonl). Leave --dataset out to download ACEBench from GitHub, or clone "
            "github.com/ACEBench/ACEBench and pass its folder."
        )
    if not rows:
        raise UserInputError(f"ACEBench {category} in {source!r} has no rows.")
    return Dataset.from_list(rows)


__all__ = [
    "ACEBENCH_COMMIT",
    "ACEBENCH_GITHUB",
    "NON_INTERACTIVE_CATEGORIES",
    "NORMAL_CATEGORIES",
    "SPECIAL_CATEGORIES",
    "convert_category",
    "convert_row",
    "default_cache_dir",
    "download",
    "is_checkout",
    "load_acebench",
    "prepare",
    "read_category",
    "read_templates",
    "render_prompt",
]


if __name__ == "__main__":
    import sys

    try:
        main(sys.argv[1:])
    except UserInputError as err:
        sys.exit(f"error: {err}")
