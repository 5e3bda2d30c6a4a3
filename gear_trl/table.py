"""The paper's table from evaluation reports: per benchmark and arm, the mean score over training seeds, and each arm's
paired difference from the baseline with its 95% t-interval over the seeds both arms ran.

    gear-trl-table --baseline grpo \
        --arm grpo results/Qwen3-4B-grpo-math-seed-*-*.json \
        --arm gear results/Qwen3-4B-gear-math-seed-*-*.json --output table.md

Each report is one `gear_trl.evaluate --output` file; `--start` adds the untrained model's reports (one per benchmark,
no seed) as a column beside the arms. Its benchmark is its `preset` (or, for a report without one,
its dataset and split); its score is `accuracy` (avg@k for k samples); its training seed is read from its `model`
path with `--seed_pattern` (default `seed[-_]?(\\d+)`, which matches docs/reproducing.md's
`--output_dir outputs/<run>-seed-S`), else from the report file's own path. Differences are paired by seed: a
seed's baseline score is subtracted from the arm's on the same benchmark, so run-to-run variation shared by both arms
of a seed cancels; the interval is Student's t over those differences (none with fewer than two pairs).

Reports are refused, all problems listed at once before anything is printed, when their chat mode differs (the
table holds one mode), when two reports of one benchmark differ in preset or sampling (temperature, top-p, top-k,
new tokens, samples), when a seed cannot be read or appears twice for one arm and benchmark, or when a report has no
score. Reports written before evaluation recorded `chat_mode`, `preset` and `sampling` at the top level are read
from their `config` (`chat_template_kwargs.enable_thinking`, `benchmark`, the sampling options).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass

from .inputs.errors import UserInputError
from .inputs.flags import FlagParser

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "max_new_tokens", "num_samples")
"""The sampling a report's score depends on; reports of one benchmark must agree on each."""
DEFAULT_SEED_PATTERN = r"seed[-_]?(\d+)"
LEVEL = 0.95


# ---------------------------------------------------------------------------------------------------------------------
# Statistics (the bench studies use these too)
# ---------------------------------------------------------------------------------------------------------------------


def _t_log_norm(df: int) -> float:
    return math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)


def _t_mass_above_zero(x: float, df: int, n: int = 2000) -> float:
    """P(0 < T < x) for x >= 0, by Simpson's rule after substituting t = sqrt(df) tan(theta): the mass is
    C sqrt(df) times the integral of cos(theta)^(df - 1) over [0, atan(x / sqrt(df))], a smooth integrand on a bounded
    interval, so the rule stays accurate for any x (integrating the density over [0, x] itself lost its mass near 0
    once x was large, and for t in the millions returned a CDF above 1)."""
    scale = math.exp(_t_log_norm(df)) * math.sqrt(df)
    end = math.atan(x / math.sqrt(df))
    h = end / n
    total = 0.0
    for i in range(n + 1):
        c = math.cos(i * h)
        value = c ** (df - 1) if c > 0 else 0.0
        total += value * (1 if i in (0, n) else 4 if i % 2 else 2)
    return min(0.5, scale * total * h / 3)


def t_cdf(x: float, df: int) -> float:
    """P(T <= x) for Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError(f"need df >= 1; got {df}.")
    mass = _t_mass_above_zero(abs(x), df)
    return 0.5 + mass if x >= 0 else 0.5 - mass


def t_quantile(p: float, df: int) -> float:
    """The `p` quantile of Student's t with `df` degrees of freedom (p in (0.5, 1)), by bisection on its CDF, which
    is the regularized incomplete beta function evaluated here by Simpson's rule on the density."""
    if not 0.5 < p < 1 or df < 1:
        raise ValueError(f"need 0.5 < p < 1 and df >= 1; got p={p}, df={df}.")
    low, high = 0.0, 1.0
    while 0.5 + _t_mass_above_zero(high, df) < p:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if 0.5 + _t_mass_above_zero(mid, df) < p else (low, mid)
    return (low + high) / 2


def paired_t_test(differences: list[float]) -> float:
    """Two-sided p-value of "the mean paired difference is 0": Student's t over the per-seed differences (NaN with
    fewer than 2; with no spread, 0.0 for a non-zero mean and 1.0 for a zero one)."""
    values = [d for d in differences if d is not None and not math.isnan(d)]
    n = len(values)
    if n < 2:
        return math.nan
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    if sd == 0:
        return 0.0 if mean != 0 else 1.0
    t = mean / (sd / math.sqrt(n))
    return min(1.0, 2 * (1 - t_cdf(abs(t), n - 1)))


def holm(p_values: list[float], m: int | None = None) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the i-th smallest p times (m - i + 1), made
    non-decreasing, capped at 1. `m` (default: the non-NaN p-values) is the size of the declared family; a NaN p (a
    comparison that could not be made) stays NaN, and counts in `m` only when `m` is given."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    m = len(ranked) if m is None else m
    if m < len(ranked):
        raise ValueError(f"m = {m} is smaller than the {len(ranked)} p-values given.")
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def paired_interval(differences: list[float], level: float = LEVEL) -> dict:
    """Mean of per-seed paired differences and its two-sided t-interval; NaN bounds with fewer than 2 seeds."""
    values = [d for d in differences if d is not None and not math.isnan(d)]
    n = len(values)
    if n == 0:
        return {"mean": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n_seeds": 0, "values": []}
    mean = statistics.fmean(values)
    if n < 2:
        return {"mean": mean, "ci_low": math.nan, "ci_high": math.nan, "n_seeds": n, "values": values}
    half = t_quantile(0.5 + level / 2, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return {"mean": mean, "ci_low": mean - half, "ci_high": mean + half, "n_seeds": n, "values": values}


# ---------------------------------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One report as the table reads it."""

    path: str
    arm: str
    benchmark: str
    """The row label: the preset, else `dataset [split]`."""
    data: tuple
    """(dataset, configuration, split): what was scored; one row per distinct one."""
    seed: int
    score: float
    chat_mode: str | None
    preset: str | None
    sampling: tuple
    provenance: tuple = ()
    """(backend, git commit) from the report's `provenance`, where it has one: listed under the table."""


def _chat_mode(report: dict) -> str | None:
    if "chat_mode" in report:
        return report["chat_mode"]
    thinking = ((report.get("config") or {}).get("chat_template_kwargs") or {}).get("enable_thinking")
    return None if thinking is None else ("thinking" if thinking else "non-thinking")


def _preset(report: dict) -> str | None:
    if "preset" in report:
        return report["preset"]
    name = (report.get("config") or {}).get("benchmark")
    if name is None:
        return None
    from .evaluation.benchmarks import PRESETS, get_preset

    try:
        return get_preset(name).name
    except UserInputError:
        return name if name in PRESETS else str(name)


def _sampling(report: dict) -> tuple:
    given = report.get("sampling")
    source = given if isinstance(given, dict) else (report.get("config") or {})
    return tuple((key, source.get(key)) for key in SAMPLING_KEYS)


START = "start"
"""The arm name of the untrained model's reports (`--start`): one per benchmark, no training seed."""


def read_entry(path: str, arm: str, seed_pattern: re.Pattern | None, problems: list[str]) -> Entry | None:
    """The report at `path` as an `Entry`, or None with the reasons appended to `problems`; `seed_pattern` None (the
    untrained model's reports) reads no seed (-1)."""
    try:
        with open(path, encoding="utf-8") as handle:
            report = json.load(handle)
    except (OSError, ValueError) as err:
        problems.append(f"{path}: cannot be read as a JSON report ({err}).")
        return None
    if not isinstance(report, dict):
        problems.append(f"{path}: not an evaluation report (a JSON object).")
        return None
    score = report.get("accuracy")
    if not isinstance(score, (int, float)) or isinstance(score, bool) or math.isnan(score):
        problems.append(f"{path}: no score (`accuracy` is {score!r}).")
        return None
    match = None
    if seed_pattern is not None:
        match = seed_pattern.search(str(report.get("model", ""))) or seed_pattern.search(path)
    if seed_pattern is not None and not match:
        problems.append(
            f"{path}: no training seed in its model path {report.get('model')!r} or its file name (--seed_pattern "
            f"{seed_pattern.pattern!r}); train each seed into its own output_dir, e.g. outputs/<run>-seed-S."
        )
        return None
    preset = _preset(report)
    config = report.get("config") or {}
    data = (report.get("dataset"), config.get("dataset_config"), report.get("split"))
    benchmark = preset or f"{data[0]} [{data[2]}]"
    seed = int(match.group(1)) if match else -1
    given = report.get("provenance") if isinstance(report.get("provenance"), dict) else {}
    provenance = (given.get("backend"), given.get("git_commit"))
    return Entry(
        path, arm, benchmark, data, seed, float(score), _chat_mode(report), preset, _sampling(report), provenance
    )


def check_entries(entries: list[Entry]) -> list[str]:
    """Problems that make the reports incomparable: one chat mode for the table; one preset and one sampling per
    scored dataset split, and one dataset split per preset; one report per arm, benchmark and seed."""
    problems = []
    modes: dict[str | None, list[str]] = {}
    for entry in entries:
        modes.setdefault(entry.chat_mode, []).append(entry.path)
    if len(modes) > 1:
        listed = "; ".join(f"{mode or 'unrecorded'}: {', '.join(paths[:3])}" for mode, paths in modes.items())
        problems.append(f"the reports differ in chat mode ({listed}); score every model in one mode.")
    by_preset: dict[str, set] = {}
    for entry in entries:
        if entry.preset is not None:
            by_preset.setdefault(entry.preset, set()).add(entry.data)
    for preset, data in by_preset.items():
        if len(data) > 1:
            problems.append(
                f"{preset}: the reports scored different data under one preset ({sorted(map(str, data))})."
            )
    by_data: dict[tuple, list[Entry]] = {}
    for entry in entries:
        by_data.setdefault(entry.data, []).append(entry)
    for group in by_data.values():
        benchmark = group[0].benchmark
        for what, key in (("preset", lambda e: e.preset), ("sampling", lambda e: e.sampling)):
            seen: dict = {}
            for entry in group:
                seen.setdefault(key(entry), []).append(entry.path)
            if len(seen) > 1:
                shown = "; ".join(
                    f"{dict(value) if what == 'sampling' else value}: {', '.join(paths[:3])}"
                    for value, paths in seen.items()
                )
                problems.append(f"{benchmark}: the reports differ in {what} ({shown}).")
        counts: dict[tuple[str, int], list[str]] = {}
        for entry in group:
            counts.setdefault((entry.arm, entry.seed), []).append(entry.path)
        for (arm, seed), paths in counts.items():
            if len(paths) > 1:
                which = "the untrained model (--start)" if arm == START else f"arm {arm!r}"
                per = "" if arm == START else f" for seed {seed}"
                problems.append(f"{benchmark}: {which} has {len(paths)} reports{per}: {', '.join(paths)}.")
    return problems


def build_table(entries: list[Entry], arms: list[str], baseline: str, level: float = LEVEL) -> dict:
    """{"baseline", "level", "chat_mode", "benchmarks": {benchmark: {"arms": {arm: {"mean", "n_seeds", "seeds"}},
    "paired": {arm: paired_interval(...) + "seeds"}}}}: means over each arm's seeds, and each non-baseline arm's
    differences from the baseline over the seeds both have; "start": the untrained model's score (`--start`), or
    None."""
    benchmarks: dict[str, dict] = {}
    for data in dict.fromkeys(entry.data for entry in entries):
        group = [entry for entry in entries if entry.data == data]
        benchmark = group[0].benchmark
        scores = {arm: {} for arm in arms}
        start = None
        for entry in group:
            if entry.arm == START:
                start = entry.score
            else:
                scores[entry.arm][entry.seed] = entry.score
        cells = {
            arm: {
                "mean": statistics.fmean(values.values()) if values else math.nan,
                "n_seeds": len(values),
                "seeds": sorted(values),
            }
            for arm, values in scores.items()
        }
        paired = {}
        for arm in arms:
            if arm == baseline:
                continue
            seeds = sorted(set(scores[arm]) & set(scores[baseline]))
            cell = paired_interval([scores[arm][s] - scores[baseline][s] for s in seeds], level)
            paired[arm] = {**cell, "seeds": seeds}
        benchmarks[benchmark] = {"start": start, "arms": cells, "paired": paired}
    modes = {entry.chat_mode for entry in entries}
    return {
        "baseline": baseline,
        "level": level,
        "chat_mode": next(iter(modes)) if len(modes) == 1 else None,
        "backends": sorted({str(e.provenance[0]) for e in entries if e.provenance and e.provenance[0]}),
        "git_commits": sorted({str(e.provenance[1]) for e in entries if e.provenance and e.provenance[1]}),
        "benchmarks": benchmarks,
    }


def _number(value: float, signed: bool = False) -> str:
    return "n/a" if math.isnan(value) else (f"{value:+.3f}" if signed else f"{value:.3f}")


def markdown(table: dict, arms: list[str]) -> str:
    """The table as Markdown: a row per benchmark; each arm's mean (seeds), then each other arm's paired difference
    from the baseline with its interval (pairs)."""
    baseline = table["baseline"]
    others = [arm for arm in arms if arm != baseline]
    percent = f"{table['level']:.0%}"
    with_start = any(row.get("start") is not None for row in table["benchmarks"].values())
    header = ["benchmark", *(["start (untrained)"] if with_start else []), *(f"{arm} mean (seeds)" for arm in arms)]
    header += [f"{arm} - {baseline} [{percent} CI] (pairs)" for arm in others]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for benchmark, row in table["benchmarks"].items():
        cells = [benchmark]
        if with_start:
            cells.append("-" if row.get("start") is None else _number(row["start"]))
        for arm in arms:
            cell = row["arms"][arm]
            cells.append(f"{_number(cell['mean'])} ({cell['n_seeds']})" if cell["n_seeds"] else "-")
        for arm in others:
            cell = row["paired"][arm]
            if cell["n_seeds"] == 0:
                cells.append("no shared seed")
            elif math.isnan(cell["ci_low"]):
                cells.append(f"{_number(cell['mean'], True)} (1 pair: no interval)")
            else:
                cells.append(
                    f"{_number(cell['mean'], True)} [{_number(cell['ci_low'], True)}, "
                    f"{_number(cell['ci_high'], True)}] ({cell['n_seeds']})"
                )
        lines.append("| " + " | ".join(cells) + " |")
    mode = table["chat_mode"] or "unrecorded"
    lines.append("")
    lines.append(
        f"Chat mode: {mode}. Means over training seeds; differences paired by seed, with Student's t-interval over "
        "the pairs (docs/reproducing.md, statistics plan)."
    )
    if table.get("backends") or table.get("git_commits"):
        lines.append(
            f"Scored with backend(s) {', '.join(table['backends']) or 'unrecorded'} at gear_trl commit(s) "
            f"{', '.join(c[:12] for c in table['git_commits']) or 'unrecorded'}."
        )
    return "\n".join(lines)


def make_parser() -> argparse.ArgumentParser:
    parser = FlagParser(
        prog="gear-trl-table",
        description="Build the paper's table (per benchmark and arm: mean over seeds, paired 95% intervals against "
        "the baseline) from gear_trl.evaluate reports.",
    )
    parser.add_argument(
        "--arm",
        nargs="+",
        action="append",
        required=True,
        metavar=("NAME", "REPORT"),
        help="An arm's name and its reports (every benchmark and seed); repeat for each arm.",
    )
    parser.add_argument(
        "--start",
        nargs="+",
        default=[],
        metavar="REPORT",
        help="The untrained model's reports (one per benchmark, no training seed), shown as the 'start' column; "
        "held to the same chat mode, preset and sampling as the arms'.",
    )
    parser.add_argument("--baseline", required=True, help="The arm the others are paired against (e.g. grpo).")
    parser.add_argument(
        "--seed_pattern",
        default=DEFAULT_SEED_PATTERN,
        help="Regular expression whose first group is the training seed, searched in each report's `model` path, "
        "then in its file path (default: %(default)s).",
    )
    parser.add_argument("--output", help="Write the Markdown table here as well as printing it.")
    parser.add_argument("--json", help="Write the table's figures (means, differences, intervals, seeds) as JSON.")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    problems: list[str] = []
    arms = [group[0] for group in args.arm]
    if len(set(arms)) != len(arms):
        problems.append(f"--arm names repeat: {arms}.")
    if any(len(group) < 2 for group in args.arm):
        problems.append(f"--arm needs a name and at least one report: {[g for g in args.arm if len(g) < 2]}.")
    if args.baseline not in arms:
        problems.append(f"--baseline {args.baseline!r} is not one of the arms {arms}.")
    try:
        pattern = re.compile(args.seed_pattern)
        if pattern.groups < 1:
            problems.append(f"--seed_pattern {args.seed_pattern!r} needs a group capturing the seed.")
    except re.error as err:
        problems.append(f"--seed_pattern {args.seed_pattern!r} is not a regular expression ({err}).")
        pattern = None
    entries = []
    if pattern is not None and pattern.groups >= 1:
        for arm, *paths in args.arm:
            entries += [e for path in paths if (e := read_entry(path, arm, pattern, problems)) is not None]
    if args.start and START in arms:
        problems.append(f"--arm {START!r} is the name of the --start column: name the arm otherwise.")
    entries += [e for path in args.start if (e := read_entry(path, START, None, problems)) is not None]
    problems += check_entries(entries)
    if problems:
        raise UserInputError("the table cannot be built:\n  " + "\n  ".join(problems))
    table = build_table(entries, arms, args.baseline)
    table["start_reports"] = list(args.start)
    text = markdown(table, arms)
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(table, handle, indent=2, allow_nan=True)
    return table


def cli(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    from .inputs.errors import exit_on_user_error

    exit_on_user_error(main, argv)


if __name__ == "__main__":
    cli(sys.argv[1:])
