"""Generated blocks: every figure the results pages and the README quote, written from the committed JSON.

A Markdown file holds a block as

    <!-- gen:horizon.table -->
    ...generated text...
    <!-- /gen -->

(or inline, on one line, inside a sentence or a table cell), and `BLOCKS[name]()` returns the text between the two
markers. `python -m docs.results_blocks --write` rewrites every block of every file in `FILES` in place;
`python -m docs.results_blocks --check` (and tests/test_results_blocks.py) fails where a block differs from what the
JSON gives. Prose around a block is written by hand; the figures inside it never are.

Plain code: the standard library and the files in `PATHS` only (no gear_trl, no bench import), so the module
loads the way docs/hooks.py is loaded, by file path, or as `python -m docs.results_blocks` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Every file a block reads, in one place: when bench/results/ is reorganized, remap them here. All are JSON but
# "warm_starts": the warm starts' accuracies as data/scripts/make_warm_start.py printed them, committed only as
# data/README.md's tables (no JSON holds them), read from there by `warm_start_row`.
PATHS = {
    "horizon": "bench/results/horizon/horizon.json",
    "horizon.rep1": "bench/results/horizon/replication_seeds_8_to_15/horizon.json",  # seeds 8-15: none, gear-signed, gear-distill
    "horizon.rep2": "bench/results/horizon/replication_seeds_16_to_31/horizon.json",  # seeds 16-31: the same arms
    "horizon.rep3": "bench/results/horizon/replication_distill_0.25_seeds_32_to_47/horizon.json",  # seeds 32-47: none, gear-distill-0.25
    "horizon.rep3_weights": "bench/results/horizon/replication_distill_0.5_seeds_32_to_47/horizon.json",  # seeds 32-47: gear-distill
    "horizon.k16_start": "bench/results/horizon/k16_start.json",
    "learning": "bench/results/learning/math.json",
    "learning.tools": "bench/results/learning/tools.json",
    "learning.knobs": "bench/results/learning/math_knobs.json",
    "learning.tools_knobs": "bench/results/learning/tools_knobs.json",
    "learning.tools_lrprobe": "bench/results/learning/tools_lrprobe.json",
    "credit_sites.arith": "bench/results/credit_sites/arith.json",
    "credit_sites.tools": "bench/results/credit_sites/tools.json",
    "teacher_sweep": "bench/results/teacher_sweep/teacher_sweep.json",
    "headroom": "bench/results/headroom/headroom.json",
    "overhead.cpu": "bench/results/overhead/cpu.json",
    "overhead.cuda": "bench/results/overhead/cuda.json",
    "overhead.cuda_chunk64": "bench/results/overhead/cuda_chunk64.json",
    "overhead.cuda_chunk512": "bench/results/overhead/cuda_chunk512.json",
    "overhead.cuda_chunk2048": "bench/results/overhead/cuda_chunk2048.json",
    "overhead.cuda_h200": "bench/results/overhead/cuda_h200_quick.json",  # one H200, ce4f9b3, 2026-12-04
    "recipe_shape.h200": "bench/results/recipe_shape/h200.json",
    "overhead.host_cost": "bench/results/overhead/host_cost.json",
    "overhead.teacher_pass": "bench/results/overhead/teacher_pass.json",
    "warm_starts": "data/README.md",
    "credit_methods": "bench/results/credit_methods/credit_methods.json",  # seeds 100-115, the declared study
    "credit_methods.item6": "bench/results/credit_methods/credit_methods_item6.json",  # seeds 200-215, amendment 2
    "credit_methods.exploration": "bench/results/credit_methods/credit_methods_exploration.json",  # seeds 0-7
    "credit_methods.sdpo_teacher": "bench/results/credit_methods/sdpo_teacher.json",
    "credit_methods.sdpo_teacher_k4": "bench/results/credit_methods/sdpo_teacher_independent-k4.json",
    "credit_methods.sdpo_teacher_chained": "bench/results/credit_methods/sdpo_teacher_chained-k4.json",
}

# The files whose blocks `--write` rewrites and the test checks.
FILES = (
    "README.md",
    "docs/results/index.md",
    "docs/results/credit-methods.md",
    "docs/results/horizon.md",
    "docs/results/headroom.md",
    "docs/results/learning.md",
    "docs/results/performance.md",
    "docs/results/teacher-sweep.md",
    "docs/configuration.md",
    "docs/getting-started.md",
)

BLOCK = re.compile(r"<!-- gen:([a-z0-9_.-]+) -->(.*?)<!-- /gen -->", re.DOTALL)
REFRESH = "python -m docs.results_blocks --write"


@cache
def load(key: str) -> dict:
    return json.loads((REPO / PATHS[key]).read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------------------------------
# Statistics: the same paired t-interval as gear_trl.table (copied: this module imports nothing of the package)
# ---------------------------------------------------------------------------------------------------------------------


def paired(values: list[float]) -> dict:
    """Mean of paired per-seed differences and its 95% t-interval (`gear_trl.table.paired_interval`, the one the
    studies and `gear-trl-table` use)."""
    from gear_trl.table import paired_interval

    return paired_interval(list(values))


def ci(x: dict, digits: int = 3) -> str:
    """`+0.031 [+0.016, +0.046]`."""
    return f"{x['mean']:+.{digits}f} [{x['ci_low']:+.{digits}f}, {x['ci_high']:+.{digits}f}]"


def above(x: dict) -> int:
    return sum(v > 0 for v in x["values"])


def below(x: dict) -> int:
    return sum(v < 0 for v in x["values"])


# ---------------------------------------------------------------------------------------------------------------------
# The horizon study
# ---------------------------------------------------------------------------------------------------------------------

HELD, REWARD = "sampled_accuracy_minus_none", "reward_last_minus_none"


def cell(variant: str, k: int, key: str = "horizon") -> dict:
    return load(key)["variants"][variant][str(k)]


def arm(name: str, variant: str = "independent", k: int = 8, key: str = "horizon") -> dict:
    return cell(variant, k, key)["arms"][name]


def pooled(name: str, keys: tuple[str, ...], metric: str = HELD) -> dict:
    """`name`'s paired differences from `none` at independent K = 8, pooled over the reports `keys` (disjoint seeds)."""
    return paired([v for key in keys for v in arm(name, key=key)[metric]["values"]])


def weights_025_minus_05(metric: str = HELD) -> dict:
    """0.25 - 0.5 paired by seed on seeds 32-47 (the third replication's 0.25 and the weight comparison's 0.5)."""
    light = arm("gear-distill-0.25", key="horizon.rep3")[metric.replace("_minus_none", "")]["values"]
    blend = arm("gear-distill", key="horizon.rep3_weights")[metric.replace("_minus_none", "")]["values"]
    return paired([a - b for a, b in zip(light, blend, strict=True)])


DISTILL_KEYS = ("horizon", "horizon.rep1", "horizon.rep2", "horizon.rep3_weights")  # gear-distill: seeds 0-47
SIGNED_KEYS = ("horizon", "horizon.rep1", "horizon.rep2")  # gear-signed: seeds 0-31
LIGHT_KEYS = ("horizon", "horizon.rep3")  # gear-distill-0.25: seeds 0-7 and 32-47


def horizon_rows() -> list[tuple[str, str, str, dict, dict]]:
    """(arm, what it is, seeds, held-out - none, reward - none): the page's one table, independent K = 8."""

    def own(name):
        body = arm(name)
        return body[HELD], body[REWARD]

    rows = [
        ("`oracle-process`", "label oracle: each decision's own correctness as its advantage", "0-7", *own("oracle-process")),
        ("`oracle-gear`", "label oracle: GEAR's weighting fed perfect labels", "0-7", *own("oracle-gear")),
        ("`gear-solution`", "GEAR at its defaults, teacher shown the solution", "0-7", *own("gear-solution")),
        ("`gear-distill-0.25`", "`gear-solution` + `distillation_weight: 0.25`", "32-47 (declared test)",
         arm("gear-distill-0.25", key="horizon.rep3")[HELD], arm("gear-distill-0.25", key="horizon.rep3")[REWARD]),
        ("`gear-distill-0.25`", "the same", "0-7 and 32-47 pooled",
         pooled("gear-distill-0.25", LIGHT_KEYS), pooled("gear-distill-0.25", LIGHT_KEYS, REWARD)),
        ("`gear-distill`", "`gear-solution` + `distillation_weight: 0.5`", "0-47 pooled",
         pooled("gear-distill", DISTILL_KEYS), pooled("gear-distill", DISTILL_KEYS, REWARD)),
        ("`gear-distill-1.0`", "distillation alone (TRL's SDPO default)", "0-7", *own("gear-distill-1.0")),
    ]  # fmt: skip
    return rows


def horizon_table() -> str:
    none = cell("independent", 8)["none_accuracy"]
    lines = [
        f"`independent` K = 8, 60 steps; GRPO (`none`) takes held-out sampled accuracy from {none['start']:.3f} to "
        f"{none['end']:.3f} [{none['end_ci_low']:.3f}, {none['end_ci_high']:.3f}]. Each arm minus GRPO, paired by seed, "
        "95% t-interval:",
        "",
        "| arm | what it is | seeds | held-out - GRPO | training reward - GRPO | seeds above GRPO (held-out) |",
        "|---|---|---|---|---|---|",
    ]
    for name, what, seeds, held, reward in horizon_rows():
        lines.append(f"| {name} | {what} | {seeds} | {ci(held)} | {ci(reward)} | {above(held)} of {held['n_seeds']} |")
    return "\n".join(lines)


def _credit_methods_answer(cell_name: str) -> str:
    """The credit-methods study's attribution at `cell_name` in one sentence, or that it is still running."""
    data = load("credit_methods")["cells"].get(cell_name)
    link = "[credit-methods study](credit-methods.md)"
    if not data:
        return f"the {link} asks."
    gear = data["attribution"]["distillation_weight=0.25"]["heldout"]
    grpo = data["arms"]["grpo-distill-0.25"]["heldout"]["minus_none"]
    adds = "add to it" if _gains(gear) else "add nothing resolved"
    return (f"on fresh seeds the {link} found the same distillation on GRPO's uniform advantage gains "
            f"{ci(grpo)} and GEAR's weights {adds} ({ci(gear)} at 0.25, Holm p {_holm(gear)}).")


def horizon_findings() -> str:
    chained = {k: cell("chained", k) for k in (2, 4, 8)}
    independent = {k: cell("independent", k) for k in (2, 4, 8)}
    process = arm("oracle-process")[HELD]
    light = arm("gear-distill-0.25", key="horizon.rep3")[HELD]
    light_pool = pooled("gear-distill-0.25", LIGHT_KEYS)
    versus = weights_025_minus_05()
    blend_fresh = arm("gear-distill", key="horizon.rep3_weights")[HELD]
    blend_pool = pooled("gear-distill", DISTILL_KEYS)
    gear_chained = ", ".join(ci(chained[k]["arms"]["oracle-gear"][HELD]) for k in (2, 4, 8))
    reps = [arm("gear-distill", key=k)[HELD] for k in ("horizon.rep1", "horizon.rep2")]
    return "\n".join([
        f"- **GEAR's weighting alone ties GRPO, even fed perfect labels.** `oracle-gear` (GEAR's segments and weights "
        f"given a signal of 1 from the first wrong token on) ends {ci(arm('oracle-gear')[HELD])} held-out at "
        f"`independent` K = 8 and {gear_chained} at `chained` K = 2, 4, 8; GEAR with a real teacher "
        f"(`gear-solution`) {ci(arm('gear-solution')[HELD])} at `independent` K = 8 and "
        f"{ci(arm('gear-solution', 'chained', 4)[HELD])} at `chained` K = 4, though its teacher opens a segment at a "
        f"failed rollout's first error in {arm('gear-solution')['localization']['onset_rate']:.2f} of "
        "them. Loosened (larger eps or alpha, a lowered prefix), the GEAR-shaped oracles fall further below GRPO the "
        "more blame they move.",
        f"- **Exact per-decision credit beats GRPO at `independent` K = 8**: `oracle-process` {ci(process)} held-out, "
        f"above GRPO on {above(process)} of {process['n_seeds']} seeds, the study's one measurable ceiling. At "
        f"`independent` K = 4 it ties ({ci(arm('oracle-process', 'independent', 4)[HELD])}); in `chained` it is level "
        f"with GRPO or below at every K ({ci(arm('oracle-process', 'chained', 8)[HELD])} at K = 8).",
        f"- **One real setting gains, and passed the test declared before it ran**: `distillation_weight: 0.25` with "
        f"the solution teacher, {ci(light)} held-out on the {light['n_seeds']} fresh seeds 32-47 ({above(light)} "
        f"above GRPO), {ci(light_pool)} pooled with seeds 0-7. The option blends the teacher's sampled-token "
        "log-ratio into the advantage, `(1 - w) A_t + w (log pT - log pS)`, so the gain may be the distillation's "
        f"rather than GEAR's weighting: {_credit_methods_answer('independent-k8')}",
        f"- **No difference resolved between 0.25 and 0.5; at 1.0 the gain is gone.** 0.25 - 0.5 on seeds 32-47: "
        f"{ci(versus)} held-out (declared). 0.5 gains {ci(blend_fresh)} there and {ci(blend_pool)} over its "
        f"48 seeds, but failed both of its own declared replications (seeds 8-15: {ci(reps[0])}; 16-31: "
        f"{ci(reps[1])}). Distillation alone (1.0) {ci(arm('gear-distill-1.0')[HELD])}.",
        f"- GRPO learns in every cell (`chained` K = 4: {chained[4]['none_accuracy']['start']:.3f} -> "
        f"{chained[4]['none_accuracy']['end']:.3f}; `independent` K = 8: "
        f"{independent[8]['none_accuracy']['start']:.3f} -> {independent[8]['none_accuracy']['end']:.3f}, early "
        "learning there), so no cell sits at a floor or a ceiling.",
    ])  # fmt: skip


def horizon_cost() -> str:
    """Runs and CPU-hours over the study's report and the four replication reports (a run two share counts once)."""

    def runs(key):
        report = load(key)
        seeds = report["config"]["budget"]["seeds"]
        return {
            (variant, k, name, seed): body["cpu_s_per_run"]
            for variant, ks in report["variants"].items()
            for k, c in ks.items()
            for name, body in c["arms"].items()
            for seed in seeds
        }

    every = {}
    for key in ("horizon", "horizon.rep1", "horizon.rep2", "horizon.rep3", "horizon.rep3_weights"):
        every.update(runs(key))
    costs = list(every.values())
    return (
        f"{len(every)} runs, {sum(costs) / 3600:.1f} CPU-hours in all, {min(costs):.0f}-{max(costs):.0f} "
        "CPU-seconds a run (one thread)"
    )


def horizon_k16() -> str:
    scores = load("horizon.k16_start")["variants"]
    return (
        f"both warm starts score {scores['independent']['accuracy']:.3f} and {scores['chained']['accuracy']:.3f} "
        "there (`independent`, `chained`)"
    )


def readme_horizon() -> str:
    light = arm("gear-distill-0.25", key="horizon.rep3")[HELD]
    return (
        f"GEAR's weighting ties GRPO, even with perfect labels; exact per-decision credit beats it "
        f"({ci(arm('oracle-process')[HELD])}); `distillation_weight` 0.25 gains {ci(light)} on fresh seeds"
    )


# ---------------------------------------------------------------------------------------------------------------------
# The other studies: the README's and the results index's one-line cells
# ---------------------------------------------------------------------------------------------------------------------


def _mean_std(summary: dict, mode: str, metric: str) -> str:
    x = summary[mode][metric]
    return f"{x['mean']:.3f} ± {x['std']:.3f}"


def readme_learning() -> str:
    summary = load("learning")["summary"]
    window = load("learning")["config"]["window"]
    return (
        f"no: training reward over the last {window} steps `gear` {_mean_std(summary, 'gear', 'reward_last')}, "
        f"GRPO {_mean_std(summary, 'none', 'reward_last')}"
    )


def readme_tools() -> str:
    report = load("learning.tools")
    summary = report["summary"]
    return (
        f"held-out sampled {report['start']['eval']['sampled_accuracy']:.3f} at the start; GRPO "
        f"{_mean_std(summary, 'none', 'sampled_accuracy')}, `gear` {_mean_std(summary, 'gear', 'sampled_accuracy')}, "
        f"`gigpo` {_mean_std(summary, 'gigpo', 'sampled_accuracy')}: within the seed spread"
    )


def readme_sweep() -> str:
    sweep = load("teacher_sweep")["sweep"]
    return f"no teacher gives GEAR an interval above GRPO (best teacher: {ci(sweep['arms']['gear']['reward_last'])})"


def readme_headroom() -> str:
    tasks = load("headroom")["tasks"]

    def best(task):
        arms = {name: body[HELD] for name, body in tasks[task]["arms"].items() if HELD in body}
        name = max(arms, key=lambda a: arms[a]["mean"])
        return f"`{name}` {ci(arms[name])}", any(x["ci_low"] > 0 for x in arms.values())

    (arith, a_up), (chains, c_up) = best("arith"), best("calc_long")
    verdict = "an arm above GRPO" if a_up or c_up else "no arm above GRPO, oracles included"
    return f"{verdict}; best held-out: arith {arith}, tool chains {chains}"


def warm_start_row(model: str) -> dict[str, str]:
    """data/README.md's warm-start table row for `model` ("tiny-qwen3-arith-sol35"), as {column header: cell}."""
    text = (REPO / PATHS["warm_starts"]).read_text(encoding="utf-8")
    for table in re.finditer(r"^(\|.*\|)\n\|[-| ]+\|\n((?:\|.*\|\n?)+)", text, re.MULTILINE):
        header = [cell.strip() for cell in table.group(1).strip("|").split("|")]
        for line in table.group(2).splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if cells[0] == f"`{model}`":
                return dict(zip(header, cells, strict=True))
    raise KeyError(f"{model}: no row in {PATHS['warm_starts']}")


def headroom_arith_start() -> str:
    """The arith warm start's scores: the student's from the study's own evaluation (headroom.json), the teachers'
    from make_warm_start.py's (data/README.md)."""
    start = load("headroom")["tasks"]["arith"]["start"]
    row = warm_start_row("tiny-qwen3-arith-sol35")
    return (
        f"on {start['n']} held-out problems the plain student scores {start['sampled_accuracy']:.3f} sampled "
        f"({start['greedy_accuracy']:.3f} greedy) at the study's start; when the warm start was made "
        f"(data/README.md) it scored {row['sampled']} sampled ({row['greedy']} greedy), the teacher shown the answer "
        f"{row['teacher (answer)']} and the teacher shown the solution {row['teacher (solution)']}"
    )


def headroom_table() -> str:
    tasks = load("headroom")["tasks"]
    lines = [
        "| task | arm | held-out - GRPO | training reward - GRPO | onset at the error (chance) | mass moved |",
        "|---|---|---|---|---|---|",
    ]
    for task, body in tasks.items():
        for name, x in body["arms"].items():
            if HELD not in x:
                continue
            loc = x.get("localization") or {}
            onset = (
                f"{loc['onset_rate']:.2f} ({loc['onset_rate_random']:.2f})"
                if loc.get("onset_rate") is not None
                else ""
            )
            moved = f"{loc['moved_share']:.3f}" if loc.get("moved_share") is not None else ""
            lines.append(f"| {task} | `{name}` | {ci(x[HELD])} | {ci(x[REWARD])} | {onset} | {moved} |")
    return "\n".join(lines)


def headroom_findings() -> str:
    tasks = load("headroom")["tasks"]
    arith, chains = tasks["arith"]["arms"], tasks["calc_long"]["arms"]
    up = [f"{t} `{a}`" for t, b in tasks.items() for a, x in b["arms"].items() if HELD in x and x[HELD]["ci_low"] > 0]
    none = {t: b["arms"]["none"][HELD.replace("_minus_none", "")] for t, b in tasks.items()}
    return "\n".join([
        ("- **No arm's held-out interval lies above GRPO's on either task, the label oracles' included**" if not up
         else f"- **Held-out intervals above GRPO's: {', '.join(up)}**")
        + f": on arith `oracle-token` {ci(arith['oracle-token'][HELD])}, "
        f"`oracle-gear` {ci(arith['oracle-gear'][HELD])}, `oracle-strong` {ci(arith['oracle-strong'][HELD])}; on the "
        f"tool chains `oracle-gear` {ci(chains['oracle-gear'][HELD])}. With perfect localization GEAR's weighting has "
        "no effect 8 seeds can see, and loosening it does not help.",
        f"- **The teacher localizes, and it does not matter**: on arith the solution teacher opens a segment at the "
        f"first wrong token in {arith['gear-solution']['localization']['onset_rate']:.2f} of failed rollouts, the "
        f"answer teacher in {arith['gear-answer']['localization']['onset_rate']:.2f}; `gear-answer` (the paper's "
        f"setting) {ci(arith['gear-answer'][HELD])}, `gear-solution` {ci(arith['gear-solution'][HELD])}, "
        f"`gear-signed` {ci(arith['gear-signed'][HELD])}, `rlsd` {ci(arith['rlsd'][HELD])}.",
        f"- On the tool chains the teacher arms and GiGPO tie GRPO too: `gear` {ci(chains['gear'][HELD])}, "
        f"`gigpo` {ci(chains['gigpo'][HELD])}, `gear+gigpo` {ci(chains['gear+gigpo'][HELD])}, `rlsd` "
        f"{ci(chains['rlsd'][HELD])}.",
        f"- **Little room for any credit scheme**: GRPO's own held-out sampled accuracy ends at "
        f"{none['arith']['mean']:.3f} on arith and {none['calc_long']['mean']:.3f} on the chains, and GEAR acts only in "
        "groups that mix passes and fails, where most of a weak student's failures are not.",
    ])  # fmt: skip


def teacher_sweep_table() -> str:
    """One row per teacher: how well it uses the reference, how it localizes, and GEAR - GRPO on both metrics."""
    report = load("teacher_sweep")
    seeds = len(report["config"]["seeds"])
    lines = [
        f"`recipes/tiny/config_arith.yaml`, {report['config']['max_steps']} steps; GEAR - GRPO paired by seed "
        f"({seeds} seeds), 95% t-interval; training reward over the last {report['config']['window']} steps:",
        "",
        "| teacher | SFT rows with the reference | teacher acc. | student sampled acc. | onset at error (chance) "
        "| KL failed / passed | GEAR - GRPO, training reward | GEAR - GRPO, held-out sampled |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in report["teachers"]:
        loc, diag, x = t["localization"], t["diagnostic"], report["paired"][t["name"]]
        lines.append(
            f"| `{t['name']}` | {t['hint_frac']:.0%} | {t['teacher_accuracy']:.2f} | "
            f"{t['student_sampled_accuracy']:.2f} | {loc['onset_rate']:.2f} ({loc['onset_rate_random']:.2f}) | "
            f"{diag['kl_failed_over_passed']:.2f} | {ci(x['reward_last'])} | {ci(x['sampled_accuracy'])} |"
        )
    return "\n".join(lines)


def teacher_sweep_findings() -> str:
    report = load("teacher_sweep")
    paired_ = report["paired"]
    up = [n for n, x in paired_.items() for m in x.values() if m["ci_low"] > 0]
    down = [f"`{n}` {ci(m)} ({'training reward' if k == 'reward_last' else 'held-out sampled'})"
            for n, x in paired_.items() for k, m in x.items() if m["ci_high"] < 0]  # fmt: skip
    best = report["sweep"]
    arms = ", ".join(f"`{a}` {ci(x['sampled_accuracy'])}" for a, x in best["arms"].items() if a != "gear")
    return "\n".join([
        ("- **GEAR never beats GRPO here**: for no teacher and neither metric does the interval lie above zero"
         if not up else f"- **GEAR beats GRPO for {', '.join(sorted(set(up)))}**")
        + (f"; it lies below zero for {'; '.join(down)}." if down else "."),
        f"- Looser weights at the best teacher (`{best['teacher']}`) do not help either, held-out sampled - GRPO: "
        f"{arms}.",
    ])  # fmt: skip


def _target(key: str, name: str, shape: str) -> dict:
    return next(t for t in load(key)["targets"] if t["target"] == name and t["shape"] == shape)


def readme_perf_cpu() -> str:
    shapes = ("tiny", "long_prompt", "vocab")
    steps = ", ".join(f"{_target('overhead.cpu', 'step_time', s)['value']:.2f}x" for s in shapes)
    memory = max(_target("overhead.cpu", "extra_peak_memory", s)["value"] for s in shapes)
    return f"GEAR's step {steps} GRPO's (tiny, long prompts, 152k vocabulary); extra peak memory within {memory:.2%}"


def readme_perf_gpu() -> str:
    step = _target("overhead.cuda_h200", "step_time", "qwen3-4b")
    results = load("overhead.cuda_h200")["shapes"]["qwen3-4b"]["results"]
    gear, topk = results["gear/gear"], results["sdpo/topk_logits"]
    recipes = _recipe_ratios()
    return (
        f"GEAR's step {step['value']:.2f}x GRPO's, {gear['step_s']['median'] / topk['step_s']['median']:.2f}x TRL "
        f"SDPO top-k's (generation excluded); host CPU {gear['user_cpu_ratio_to_grpo']:.2f}x GRPO's; the recipes' "
        f"real step {recipes['math']:.2f}x (math), {recipes['tool_use']:.2f}x (tool use)"
    )


def _recipe_rows() -> dict[tuple[str, str], dict]:
    return {(row["task"], row["method"]): row for row in load("recipe_shape.h200")["rows"]}


def _recipe_ratios() -> dict[str, float]:
    """GEAR's second step over GRPO's (the first carries warm-up) per recipe, H200."""
    rows = _recipe_rows()
    return {t: rows[t, "gear"]["step_seconds"][-1] / rows[t, "grpo"]["step_seconds"][-1] for t in ("math", "tool_use")}


def performance_gpu() -> str:
    """The H200 figures: bench/gpu_checks.sh steps 5 and 6 at ce4f9b3 (bench/results/overhead/h200_provenance.md)."""
    meta = load("recipe_shape.h200")["meta"]
    results = load("overhead.cuda_h200")["shapes"]["qwen3-4b"]["results"]
    grpo = results["grpo"]
    lines = [
        f"One {meta['device'].split(' (')[0]}, commit {meta['commit']}, {meta['date']} (torch {meta['torch']}, "
        f"transformers {meta['transformers']}, trl {meta['trl']}, peft {meta['peft']}; "
        "provenance in `bench/results/overhead/h200_provenance.md`). "
        "Qwen3-4B's geometry, random weights, bf16, B = 8 completions of T = 1,024 tokens, generation excluded "
        "(`bench/results/overhead/cuda_h200_quick.json`, median of 2 interleaved repetitions):",
        "",
        "| configuration | step | x GRPO | teacher pass | host CPU user (x GRPO) | step extra peak |",
        "|---|---|---|---|---|---|",
    ]
    for arm in ("grpo", "gear/gear", "sdpo/topk_logits", "sdpo/full_logits"):
        x = results[arm]
        teacher = x["phases_s"].get("teacher", {}).get("median") if x.get("phases_s") else None
        lines.append(
            f"| {arm} | {x['step_s']['median'] * 1000:.0f} ms | {x['step_s']['median'] / grpo['step_s']['median']:.2f}x "
            f"| {f'{teacher * 1000:.0f} ms' if teacher else '-'} "
            f"| {x['cpu']['user_s']['median'] * 1000:.0f} ms ({x['user_cpu_ratio_to_grpo']:.2f}x) "
            f"| {x['extra_peak_mb']['step'] / 1024:.2f} GB |"
        )
    lines += [
        "",
        "The recipes' real step on the same GPU (`bench/results/recipe_shape/h200.json`: the shipped Qwen3-4B recipes, "
        "LoRA r 64, bf16, gradient checkpointing, generation through transformers, 256-token completions, 2 steps "
        "each; the tool-use GEAR row came from a second run, step 6's budget having left it out):",
        "",
        "| recipe | completions a step | GRPO step 2 | GEAR step 2 | GEAR / GRPO | teacher's share | peak GRPO -> GEAR |",
        "|---|---|---|---|---|---|---|",
    ]
    rows, ratios = _recipe_rows(), _recipe_ratios()
    for task in ("math", "tool_use"):
        grpo_row, gear_row = rows[task, "grpo"], rows[task, "gear"]
        share = [s for s in gear_row["teacher_time_frac"] if s is not None]
        lines.append(
            f"| {task} | {gear_row['completions_per_step']} | {grpo_row['step_seconds'][-1]:.1f} s "
            f"| {gear_row['step_seconds'][-1]:.1f} s | {ratios[task]:.2f}x | {sum(share) / len(share):.1%} "
            f"| {grpo_row['peak_memory_gb']:.2f} -> {gear_row['peak_memory_gb']:.2f} GB |"
        )
    lines += [
        "",
        "Two steps a run, one run a recipe and a random model: these are the recipes' cost on one GPU, not a ranking of "
        "their speed; the tool-use pair compares two machines (GEAR's row ran on a fresh one), and most of each step "
        "is generation, which the teacher does not touch.",
    ]
    return "\n".join(lines)


def performance_host() -> str:
    """GEAR's host-side work per step against GRPO's (bench/results/overhead/host_cost.json), before and after issue
    75's cuts, and its teacher pass against SDPO's part by part (teacher_pass.json)."""
    report = load("overhead.host_cost")
    lines = [
        f"Host-side work per step on CPU, counted with torch.profiler ({report['meta']['shape']}; "
        "`bench/results/overhead/host_cost.md`): `aten::` operators (each a kernel launch or more on a GPU) and "
        "synchronizations (`.item()`, `nonzero` and boolean indexing, `.tolist()`, copies to the host), GEAR over "
        "GRPO; `gpu_path` is GEAR's divergence as a pass of its own, what a CUDA device runs:",
        "",
        "| gear_trl | configuration | operators | top-level operators | synchronizations | of which GEAR's own |",
        "|---|---|---|---|---|---|",
    ]
    for label, run in report["runs"].items():
        configs = run["configs"]
        grpo = configs["grpo"]["totals"]
        for config, result in configs.items():
            if config == "grpo":
                continue
            t = result["totals"]
            own = sum(n for source, n in result["sync_sources"].items() if "gear_trl/" in source)
            lines.append(
                f"| {label} ({run['gear_trl'].split()[0]}) | {config} | {t['operators'] / grpo['operators']:.2f}x "
                f"| {t['top-level operators'] / grpo['top-level operators']:.2f}x "
                f"| {t['synchronizations']} against {grpo['synchronizations']} "
                f"({t['synchronizations'] / grpo['synchronizations']:.2f}x) | {own} |"
            )
    after = report["runs"]["after"]["configs"]
    grpo_top = after["grpo"]["totals"]["top-level operators"]
    teacher = after["gear/gpu_path"]["regions"]["teacher forward"]["top-level operators"]
    own_syncs = sorted(
        ((*source.split(" @ ", 1), n) for source, n in after["gear/gpu_path"]["sync_sources"].items() if "gear_trl/" in source),
        key=lambda item: -item[2],
    )
    best = min(after[c]["totals"]["top-level operators"] / grpo_top for c in after if c != "grpo")
    ratio = {c: after[c]["totals"]["top-level operators"] / grpo_top for c in ("gear/gpu_path", "gear/gpu_path@512")}
    syncs = after["gear/gpu_path@512"]["totals"]["synchronizations"] / after["grpo"]["totals"]["synchronizations"]
    if ratio["gear/gpu_path@512"] <= 1.3 and syncs <= 1.3:
        verdict = (
            f"- **The 1.3x target is met at the recipes' chunk 512** ({ratio['gear/gpu_path@512']:.2f}x GRPO's "
            f"top-level operators, {syncs:.2f}x its synchronizations), not at the library's 64 "
            f"({ratio['gear/gpu_path']:.2f}x), whose divergence dispatches its per-chunk operators eight times as "
            f"often. The teacher's own forward is {teacher / grpo_top:.2f}x GRPO's step by itself (a forward of every "
            "layer against GRPO's forward and backward)."
        )
    else:
        verdict = (
            f"- **The 1.3x target is not met** (best: {best:.2f}x GRPO's top-level operators, at chunk 512). The "
            f"teacher's own forward is {teacher / grpo_top:.2f}x GRPO's step by itself (a forward of every layer "
            "against GRPO's forward and backward), which leaves the rest almost no room; at chunk 64 the divergence's "
            "per-chunk operators add as much again, at the recipes' chunk 512 little."
        )
    lines += [
        "",
        verdict,
        "- GEAR's own synchronizations a step (`gear/gpu_path`), by source: "
        + ", ".join(f"{n} `{kind.strip()}` in `{where.split(':')[0].strip()}`" for kind, where, n in own_syncs)
        + ".",
        "- On CPU GEAR's divergence runs inside the loss's LM head with one BLAS dot per row (faster there, "
        "bench/results/overhead/NOTES.md), hence its operator count; a GPU takes the `gpu_path` rows.",
    ]
    parts = load("overhead.teacher_pass")["parts"]

    def ms(name: str) -> str:
        return f"{parts[name]['median_s'] * 1000:,.0f} ms"

    gear_ops = {
        label: parts[f"divergence: GEAR, chunk 64, {label}, GPU branch"]["top_level"] for label in ("ce4f9b3", "now")
    }
    lines += [
        "",
        "GEAR's teacher pass against TRL SDPO's, part by part on the same states (`bench/results/overhead/"
        f"teacher_pass.md`, CPU, times on a shared machine): forward to states {ms('forward: GEAR (backbone to states)')}"
        f" against SDPO's forward to logits {ms('forward: SDPO (backbone + head to logits)')}; GEAR's divergence "
        f"(both heads, KL and entropy) {ms('divergence: GEAR, chunk 64, now, CPU branch')} at chunk 64 against "
        f"SDPO's loss divergence from its logits {ms('divergence: SDPO full_logits loss from logits')} (full) and "
        f"{ms('divergence: SDPO topk_logits loss from logits (k 20)')} (top-k). On a GPU's branch GEAR's divergence "
        f"dispatches {gear_ops['now']:,} top-level operators at chunk 64 (ce4f9b3: {gear_ops['ce4f9b3']:,}) and "
        f"{parts['divergence: GEAR, chunk 512, now, GPU branch']['top_level']:,} at chunk 512, the Qwen3-4B recipes' "
        "setting.",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# Performance: the overhead of GEAR's teacher pass (bench/overhead.py)
# ---------------------------------------------------------------------------------------------------------------------

PERF_ROWS = (("CPU", "overhead.cpu", "tiny"), ("CPU", "overhead.cpu", "long_prompt"), ("CPU", "overhead.cpu", "vocab"),
             ("one H200 (quick, T = 1,024)", "overhead.cuda_h200", "qwen3-4b"),
             ("one H100 (older: 3c2137a)", "overhead.cuda", "qwen3-4b"))  # fmt: skip


def _perf_cell(key: str, name: str, shape: str, kind: str = "x") -> str:
    found = [t for t in load(key)["targets"] if t["target"] == name and t["shape"] == shape]
    if not found:
        return "-"
    t = found[0]
    value = f"{t['value']:.2f}x" if kind == "x" else f"{t['value']:.2%}" if kind == "%2" else f"{t['value']:.1%}"
    return value if t["holds"] else f"**{value}** (over)"


def _perf_result(key: str, shape: str, arm: str) -> dict:
    return load(key)["shapes"][shape]["results"][arm]


def performance_table() -> str:
    thresholds = {t["target"]: t["threshold"] for t in load("overhead.cpu")["targets"] if t["shape"] == "tiny"}
    lines = [
        "GEAR (`credit: gear`) against GRPO on the same batches, interleaved; ratios are GEAR's over GRPO's, memory "
        "over GRPO's step peak; a target missed is in bold:",
        "",
        f"| device | shape | step time (target {thresholds['step_time']}x; 1.15x at long_prompt) "
        f"| generation + step (target {thresholds['end_to_end_step_time']}x) | user CPU time "
        f"| extra step peak memory (target {thresholds['extra_peak_memory']:.0%}) "
        f"| teacher pass's own peak (target {thresholds['divergence_pass_memory']:.0%}) |",
        "|---|---|---|---|---|---|---|",
    ]
    for device, key, shape in PERF_ROWS:
        gear = _perf_result(key, shape, "gear/gear")
        lines.append(
            f"| {device} | {shape} | {_perf_cell(key, 'step_time', shape)} "
            f"| {_perf_cell(key, 'end_to_end_step_time', shape)} | {gear['user_cpu_ratio_to_grpo']:.2f}x "
            f"| {_perf_cell(key, 'extra_peak_memory', shape, '%2')} "
            f"| {_perf_cell(key, 'divergence_pass_memory', shape, '%')} |"
        )
    return "\n".join(lines)


def performance_findings() -> str:
    cpu_targets = load("overhead.cpu")["targets"]
    missed = [f"`{t['target']}` at {t['shape']}" for t in cpu_targets if not t["holds"]]
    sharing = _target("overhead.cpu", "teacher_prefix_sharing", "long_prompt")
    sdpo = _target("overhead.cpu", "divergence_vs_sdpo_full_logits", "vocab")
    gigpo = _target("overhead.cpu", "gigpo_fraction", "tiny")
    vocab = {arm: _perf_result("overhead.cpu", "vocab", arm) for arm in ("grpo", "gear/gear")}
    head = {arm: x["phases_s"]["lm_head_forward"]["median"] for arm, x in vocab.items()}
    cuda = {arm: _perf_result("overhead.cuda", "qwen3-4b", arm) for arm in ("grpo", "gear/gear", "sdpo/topk_logits")}
    gb = {arm: x["extra_peak_mb"]["step"] / 1024 for arm, x in cuda.items()}
    full = _perf_result("overhead.cuda", "qwen3-4b", "sdpo/full_logits")
    tensor_gb = load("overhead.cuda")["shapes"]["qwen3-4b"]["model"]["one_BxTxV_logits_tensor_gb"]
    chunks = {c: load(f"overhead.cuda_chunk{c}") for c in (64, 512, 2048)}
    chunk_text = "; ".join(
        f"{c}: {_target(f'overhead.cuda_chunk{c}', 'step_time', 'qwen3-4b')['value']:.2f}x, teacher peak "
        f"{_target(f'overhead.cuda_chunk{c}', 'divergence_pass_memory', 'qwen3-4b')['value']:.1%}"
        for c in chunks
    )
    teacher_memory = _target("overhead.cuda", "divergence_pass_memory", "qwen3-4b")
    return "\n".join([
        ("- **On CPU every target holds**" if not missed else f"- **On CPU targets missed: {', '.join(missed)}**")
        + f" ({len(cpu_targets)} across the three shapes): the table's, plus the teacher pass's peak at "
        f"{sdpo['value']:.1%} of TRL's SDPO full_logits step's and GiGPO's grouping at {gigpo['value']:.2%} of a "
        f"tiny step (target {gigpo['threshold']:.1%}).",
        f"- **Prefix sharing pays where prompts are long**: at long_prompt the teacher pass takes "
        f"{sharing['value']:.2f}x the time of the unshared pass (target at most {sharing['threshold']}x).",
        f"- **At the vocabulary shape GEAR's step is faster than GRPO's by the clock, not by the CPU.** The fused "
        f"LM-head forward, which also projects the teacher's states, takes {head['gear/gear']:.2f} s against TRL's "
        f"{head['grpo']:.2f} s for GRPO (it reuses buffers where TRL's torch fallback allocates and zeroes fresh "
        f"tiles); by user CPU time GEAR costs {vocab['gear/gear']['user_cpu_ratio_to_grpo']:.2f}x GRPO there.",
        f"- **On one H100 (older: commit 3c2137a, T = 4,096) at Qwen3-4B's shape GEAR's step is "
        f"{_target('overhead.cuda', 'step_time', 'qwen3-4b')['value']:.2f}x GRPO's, over the "
        f"{_target('overhead.cuda', 'step_time', 'qwen3-4b')['threshold']}x target**: TRL's fold is one Triton "
        f"kernel there, so GEAR runs the student's head a second time; the teacher pass takes "
        f"{cuda['gear/gear']['phases_s']['teacher']['median']:.2f} s of the {cuda['gear/gear']['step_s']['median']:.2f} s "
        f"step. Its own peak, {teacher_memory['value']:.1%} of GRPO's step peak, misses the "
        f"{teacher_memory['threshold']:.0%} target: a no-grad forward over all rows at once.",
        f"- **The chunk size is the GPU's lever** (`divergence_chunk_size`, GRPO and GEAR only, "
        f"`bench/results/overhead/cuda_chunk*.json`): {chunk_text}. The Qwen3-4B and 8B GEAR recipes set 512; the "
        "library default stays 64, chosen on CPU.",
        ("- TRL's SDPO with full-vocabulary distillation runs out of GPU memory at this length " if "error" in full
         else "- TRL's SDPO with full-vocabulary distillation runs at this length ")
        + f"(one `[B, T, V]` tensor is {tensor_gb:.1f} GB); its top-k "
        f"variant's step is {cuda['sdpo/topk_logits']['step_ratio_to_grpo']:.2f}x GRPO's with "
        f"{gb['sdpo/topk_logits']:.1f} GB of extra peak memory, against GEAR's {gb['gear/gear']:.1f} GB and GRPO's "
        f"{gb['grpo']:.1f} GB.",
    ])  # fmt: skip


def config_drop_prefix() -> str:
    return f"{ci(arm('gear-drop-prefix', 'chained', 4)[HELD])} in held-out sampled accuracy"


def config_distill() -> str:
    light = arm("gear-distill-0.25", key="horizon.rep3")[HELD]
    reps = [arm("gear-distill", key=k)[HELD] for k in ("horizon", "horizon.rep1", "horizon.rep2")]
    return (
        f"held-out gain over GRPO: 0.25 {ci(light)} on 16 fresh seeds (32-47; {above(light)} of 16 above), "
        f"{ci(pooled('gear-distill-0.25', LIGHT_KEYS))} pooled with seeds 0-7, the one real setting that passed a "
        f"replication declared before its runs; 0.5 {ci(reps[0])} on seeds 0-7, then {ci(reps[1])} and {ci(reps[2])} "
        f"on the two declared replications (8-15, 16-31: not replicated), {ci(pooled('gear-distill', DISTILL_KEYS))} "
        f"over its 48 seeds and {ci(_blend_minus_signed())} over "
        f"`credit: gear-signed` paired over 32; 0.25 - 0.5 on seeds 32-47 {ci(weights_025_minus_05())} (declared: not "
        f"resolved); 1.0, TRL's `SDPOTrainer` default, where the outcome reward drops out of the loss, "
        f"{ci(arm('gear-distill-1.0')[HELD])} (seeds 0-7)"
    )


def _blend_minus_signed() -> dict:
    blend, signed = pooled("gear-distill", SIGNED_KEYS), pooled("gear-signed", SIGNED_KEYS)
    return paired([a - b for a, b in zip(blend["values"], signed["values"], strict=True)])


def started_paired() -> str:
    both = pooled("gear-distill-0.25", LIGHT_KEYS)
    first = arm("gear-distill-0.25")[HELD]["values"][0]
    return (
        f"seed 0 ends {first:+.3f} held-out, one of the {both['n_seeds'] - above(both)} seeds in {both['n_seeds']} "
        f"where GEAR does not end ahead; over {both['n_seeds']} seeds the setting is ahead held-out on {above(both)}, "
        f"by {ci(both)}"
    )


# ---------------------------------------------------------------------------------------------------------------------
# The learning testbeds (chained arithmetic, the calculator tool task)
# ---------------------------------------------------------------------------------------------------------------------

LEARNING = (("arithmetic", "learning"), ("calculator", "learning.tools"))


def _ms(x: dict, digits: int = 3) -> str:
    return f"{x['mean']:.{digits}f} ± {x['std']:.{digits}f}"


def learning_minus_none(key: str, mode: str, metric: str) -> dict:
    """`mode` - `none` on `metric`, paired by seed, 95% t-interval."""
    summary = load(key)["summary"]
    mine, grpo = summary[mode], summary["none"]
    assert mine["seeds"] == grpo["seeds"], (key, mode)
    return paired([a - b for a, b in zip(mine[metric]["values"], grpo[metric]["values"], strict=True)])


def _span(key: str, metric: str, digits: int = 2) -> str:
    summary = load(key)["summary"]
    means = [x[metric]["mean"] for x in summary.values()]
    return f"{min(means):.{digits}f}-{max(means):.{digits}f}"


def _learning_resolved() -> list[str]:
    """Every (testbed, arm, metric) whose paired interval against GRPO excludes zero."""
    found = []
    for testbed, key in LEARNING:
        for mode in load(key)["summary"]:
            for metric, label in (("reward_last", "training reward"), ("sampled_accuracy", "held-out sampled")):
                if mode != "none" and (x := learning_minus_none(key, mode, metric))["ci_low"] * x["ci_high"] > 0:
                    found.append(f"{testbed} `{mode}` {ci(x)} {label}")
    return found


def learning_table() -> str:
    windows = " and ".join(f"{load(key)['config']['window']} steps ({testbed})" for testbed, key in LEARNING)
    seeds = len(load("learning")["config"]["seeds"])
    lines = [
        f"Mean ± sd over {seeds} seeds; training reward over the last {windows}; held-out: 200 test problems, greedy "
        "and 2 samples at temperature 1; trained-on: greedy on the training problems; the last column is the arm minus "
        "GRPO paired by seed, 95% t-interval:",
        "",
        "| testbed | arm | training reward | held-out sampled | held-out greedy | trained-on greedy "
        "| held-out sampled - GRPO |",
        "|---|---|---|---|---|---|---|",
    ]
    for testbed, key in LEARNING:
        report = load(key)
        start = report["start"]["eval"]
        trained = f"{start['train_greedy_accuracy']:.3f}" if "train_greedy_accuracy" in start else "-"
        lines.append(
            f"| {testbed} | warm start | | {start['sampled_accuracy']:.3f} | {start['greedy_accuracy']:.3f} "
            f"| {trained} | |"
        )
        for mode, x in report["summary"].items():
            trained = x["train_greedy_accuracy"]
            trained = "-" if math.isnan(trained["mean"]) else _ms(trained)
            versus = "" if mode == "none" else ci(learning_minus_none(key, mode, "sampled_accuracy"))
            name = "`none` (GRPO)" if mode == "none" else f"`{mode}`"
            lines.append(
                f"| {testbed} | {name} | {_ms(x['reward_last'])} | "
                f"{_ms(x['sampled_accuracy'])} | {_ms(x['greedy_accuracy'])} | {trained} | {versus} |"
            )
    return "\n".join(lines)


def learning_findings() -> str:
    math_, tools = load("learning"), load("learning.tools")
    ms = math_["summary"]
    mstart, tstart = math_["start"]["eval"], tools["start"]["eval"]
    sites = {name: load(f"credit_sites.{key}") for name, key in (("arithmetic", "arith"), ("the calculator", "tools"))}
    knobs, tknobs = load("learning.knobs")["summary"], load("learning.tools_knobs")["summary"]
    first = [ms[m]["reward_first"]["mean"] for m in ms]
    strong = "gear weight_alpha=3,weight_eps=0.9"

    def gear_vs(key, mode="gear"):
        return (f"{ci(learning_minus_none(key, mode, 'reward_last'))} training reward, "
                f"{ci(learning_minus_none(key, mode, 'sampled_accuracy'))} held-out sampled")

    def site(name):
        x = sites[name]
        return (f"{x['error_site']['onset']:.2f} of failed rollouts on {name} (a random token: "
                f"{x['random_model_token']['onset']:.2f})")

    def weight(name):
        x = sites[name]
        return (f"{x['error_site']['mean_weight_negative_advantage']:.2f} on {name} (a random token "
                f"{x['random_model_token']['mean_weight_negative_advantage']:.2f})")

    return "\n".join([
        "- **No credit mode separates from GRPO on either testbed.** `gear` - GRPO, paired by seed over "
        f"{len(ms['gear']['seeds'])} seeds: arithmetic {gear_vs('learning')}; calculator "
        f"{gear_vs('learning.tools')}; `gigpo` {gear_vs('learning.tools', 'gigpo')}. Three seeds resolve only "
        "large differences; "
        + (f"the only intervals that exclude zero: {'; '.join(resolved)}." if (resolved := _learning_resolved())
           else "no arm's interval on either metric excludes zero."),
        f"- **On arithmetic RL fits the problems it trains on and loses held-out.** Every mode raises the training "
        f"reward (first window {min(first):.2f}-{max(first):.2f}, last {_span('learning', 'reward_last')}) and greedy "
        f"accuracy on the {mstart['train_n']} problems it trained on ({mstart['train_greedy_accuracy']:.2f} to "
        f"{_span('learning', 'train_greedy_accuracy')}), while held-out greedy falls from "
        f"{mstart['greedy_accuracy']:.2f} to {_span('learning', 'greedy_accuracy')}: a 1.3 M-parameter model "
        "memorises 128 problems, so the comparison is one of how fast each mode fits them.",
        f"- **On the calculator RL works held-out in every mode**, each problem seen once: held-out sampled "
        f"{tstart['sampled_accuracy']:.3f} to {_span('learning.tools', 'sampled_accuracy')}, greedy "
        f"{tstart['greedy_accuracy']:.3f} to {_span('learning.tools', 'greedy_accuracy', 3)} (RL sharpens sampling "
        "toward what greedy decoding already does).",
        f"- Per-token weights without segments (`token`) end lowest on arithmetic "
        f"({_ms(ms['token']['reward_last'])} training reward against GRPO's {_ms(ms['none']['reward_last'])}); "
        "`turn` reproduces GRPO's runs exactly (one segment per single-turn completion, normalized to weight 1); "
        f"`rlsd` ties GRPO ({gear_vs('learning', 'rlsd')}), its weights bounded near 1 (weight std "
        f"{ms['rlsd']['weight_std']['mean']:.2f} against `gear`'s {ms['gear']['weight_std']['mean']:.2f}).",
        f"- **GEAR's teacher localizes more often than chance, and the weights barely move.** Over "
        f"{sites['arithmetic']['rollouts']} rollouts of each warm start (`bench/credit_sites.py`), a segment opens at the "
        f"first wrong token in {site('arithmetic')} and {site('the calculator')}; that token's mean weight in failed "
        f"rollouts with a negative advantage is {weight('arithmetic')} and {weight('the calculator')}.",
        f"- **Knobs** (seeds {', '.join(map(str, load('learning.knobs')['config']['seeds']))}): on arithmetic a "
        f"stronger modulation (`weight_alpha: 3`, `weight_eps: 0.9`) is worse ({_ms(knobs[strong]['reward_last'])} "
        f"training reward against default `gear`'s {_ms(knobs['gear']['reward_last'])}); `entropy_threshold: 0.9` "
        f"({_ms(knobs['gear entropy_threshold=0.9']['reward_last'])}) and `onset_threshold: 0.5` "
        f"({_ms(knobs['gear onset_threshold=0.5']['reward_last'])}) match the default. On the calculator "
        f"`weight_alpha: 3` ({_ms(tknobs['gear weight_alpha=3']['sampled_accuracy'])} held-out sampled) and "
        f"`onset_threshold: 0.5` ({_ms(tknobs['gear onset_threshold=0.5']['sampled_accuracy'])}) are level with GRPO "
        f"({_ms(tknobs['none']['sampled_accuracy'])}). None closes a gap or opens one.",
    ])  # fmt: skip


def learning_lrprobe() -> str:
    report = load("learning.tools_lrprobe")
    s, window = report["summary"], report["config"]["window"]
    low, high = s["none learning_rate=5e-5"], s["none learning_rate=2e-4"]
    return (
        f"2e-4 reaches the training reward of 5e-5 ({_ms(high['reward_last'])} against {_ms(low['reward_last'])} over "
        f"the last {window} steps) with lower held-out sampled accuracy ({_ms(high['sampled_accuracy'])} against "
        f"{_ms(low['sampled_accuracy'])})"
    )


def config_agreement() -> str:
    """Item 6's confirmation so far (credit_methods_item6.json): each complete cell's gain and share, the rest pending."""
    item6 = load("credit_methods.item6")
    done = []
    for cell_name, data in item6["cells"].items():
        agree = data["arms"][CM_SETTING]["heldout"]
        versus = data["attribution"]["distillation_signal"]["heldout"]
        share = agree["share_of_process_ceiling"]
        done.append(f"at `{cell_name}` (seeds {_seeds(item6)}) GRPO with it at 0.5 gained {ci(agree['minus_none'])} "
                    f"held-out over GRPO (Holm p {_holm(agree['minus_none'])})"
                    + (f", {share['mean']:.2f} [{share['ci_low']:.2f}, {share['ci_high']:.2f}] of the process ceiling" if share
                       else ", with no process ceiling above GRPO there to share")
                    + f", and {ci(versus)} over the log-ratio at the same weight (Holm p {_holm(versus)})")  # fmt: skip
    pending = ", ".join(f"`{c}`" for c in item6["cells_pending"])
    if pending:
        return "; ".join(done or ["no cell of it is complete yet"]) + f"; still running: {pending}. It stays an option"
    reaches = [c for c, d in item6["cells"].items() if d["reaches_80"]]
    verdict = ("item 6 is met, so it is the setting the docs recommend for reference-teacher runs (the defaults stay "
               "the paper's)" if len(reaches) >= 2 else
               f"it reaches 80% of the ceiling in {len(reaches)} of {len(item6['cells'])} cells, so item 6 is not met "
               "and it stays an option, not a recommendation")  # fmt: skip
    return "; ".join(done) + f". {verdict[0].upper()}{verdict[1:]}"


def config_sdpo_teacher() -> str:
    """The warm start's greedy accuracy under the student's, GEAR's and SDPO's prompts (bench/sdpo_teacher.py)."""
    kinds = load("credit_methods.sdpo_teacher")["kinds"]
    kinds_of = {k: load(k)["kinds"] for k in ("credit_methods.sdpo_teacher_k4", "credit_methods.sdpo_teacher_chained")}
    order = ("student", "gear-solution", "sdpo-demonstration", "sdpo-feedback")
    decisions = ", ".join(f"{kinds[k]['decision_accuracy']:.3f}" for k in order)
    acc = [f"{kinds[k]['accuracy']:.3f}" for k in order]
    return (
        f"{acc[0]} of them right on the plain prompt, {acc[1]} shown the reference solution in GEAR's teacher prompt, "
        f"{acc[2]} shown it as SDPO's successful demonstration and {acc[3]} as SDPO's environment feedback "
        f"(decisions right: {decisions}); on the `independent` K = 4 and `chained` K = 4 cells' warm starts "
        + "; ".join(
            f"{kinds_of[k]['student']['accuracy']:.3f} plain, {kinds_of[k]['gear-solution']['accuracy']:.3f} in GEAR's "
            f"wording, {kinds_of[k]['sdpo-demonstration']['accuracy']:.3f} and {kinds_of[k]['sdpo-feedback']['accuracy']:.3f} "
            "in SDPO's"
            for k in ("credit_methods.sdpo_teacher_k4", "credit_methods.sdpo_teacher_chained")
        )
    )


# ---------------------------------------------------------------------------------------------------------------------
# The credit-methods study (issue 51): bench/credit_methods.py writes a report's figures only for the cells whose
# declared runs are all in; the others are listed with their run counts.
# ---------------------------------------------------------------------------------------------------------------------

CM_CEILING, CM_SETTING, CM_CONTROL = "oracle-process", "grpo-agree-0.5", "grpo-distill-0.5"


def _seeds(report: dict) -> str:
    return f"{report['seeds'][0]}-{report['seeds'][-1]}"


def _holm(record: dict) -> str:
    p = record.get("p_holm")
    return "" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def _share(entry: dict) -> str:
    """An arm's share of the ceiling, or "below GRPO" where its mean gain is not above 0 (a ratio of a loss to the
    ceiling's gain is arithmetic, not a share; the report keeps it)."""
    share = entry.get("share_of_process_ceiling")
    if share and entry["minus_none"]["mean"] <= 0:
        return "below GRPO"
    return "" if not share else f"{share['mean']:.2f} [{share['ci_low']:.2f}, {share['ci_high']:.2f}]"


def _ceiling_resolved(data: dict) -> bool:
    """Whether a complete cell's process ceiling lies above GRPO (its held-out interval above 0): only then is a
    share of it given. False for a cell with no ceiling arm (`calculator`: no per-decision labels)."""
    return CM_CEILING in data["arms"] and data["arms"][CM_CEILING]["heldout"]["minus_none"]["ci_low"] > 0


NO_CEILING = "no ceiling (no per-decision labels)"
"""The share column of a cell without `oracle-process` (the declaration: reported as not available, never replaced
by another oracle's share)."""


def _cm_rows(report: dict) -> list[str]:
    """A report's rows of the page's table: each complete cell's arms and attributions."""
    seeds, rows = _seeds(report), []
    for cell_name, data in report["cells"].items():
        for name, entry in data["arms"].items():
            held, rew = entry["heldout"]["minus_none"], entry["reward"]["minus_none"]
            share = _share(entry["heldout"])
            if CM_CEILING not in data["arms"]:
                share = NO_CEILING
            elif name != CM_CEILING and not _ceiling_resolved(data):
                share = "no ceiling above GRPO"
            rows.append(f"| `{cell_name}` | `{name}` | {seeds} | {ci(held)} | {_holm(held)} | {ci(rew)} | "
                        f"{_holm(rew)} | {share} |")  # fmt: skip
        for entry in data["attribution"].values():
            held, rew = entry["heldout"], entry["reward"]
            rows.append(f"| `{cell_name}` | `{entry['arm']}` - `{entry['minus']}` | {seeds} | {ci(held)} | "
                        f"{_holm(held)} | {ci(rew)} | {_holm(rew)} | |")  # fmt: skip
    return rows


def _cm_pending_rows(report: dict) -> list[str]:
    """A report's cells still running, by how many of their declared runs are in."""
    return [f"| `{cell_name}` | under way: {runs_in} of {report['runs_declared'][cell_name]} declared runs in, none "
            f"read | {_seeds(report)} | | | | | |" for cell_name, runs_in in report["cells_pending"].items()]  # fmt: skip


def credit_methods_table() -> str:
    """The page's one table: the declared study (seeds 100-115) and item 6's confirmation (seeds 200-215), each arm
    minus GRPO paired by seed, Holm-adjusted p within its declared family, share of the process ceiling."""
    declared, item6 = load("credit_methods"), load("credit_methods.item6")
    return "\n".join([
        "| cell | arm (or difference) | seeds | held-out - GRPO | Holm p | final-window reward - GRPO | Holm p | "
        "share of `oracle-process` (held-out) |",
        "|---|---|---|---|---|---|---|---|",
        *_cm_rows(declared),
        *_cm_rows(item6),
        *_cm_pending_rows(declared),
        *_cm_pending_rows(item6),
    ])  # fmt: skip


def _holds(record: dict) -> bool:
    return record.get("p_holm", 1.0) < 0.05


def _gains(record: dict) -> bool:
    """Holds (Holm p < 0.05) with its mean above 0: the declaration's "holds (> 0)"."""
    return _holds(record) and record["mean"] > 0


def _loses(record: dict) -> bool:
    """Holds (Holm p < 0.05) with its mean below 0."""
    return _holds(record) and record["mean"] < 0


def _may_gain(record: dict) -> bool:
    """Could hold above 0 once every comparison of the family is in: Holm's adjusted p only falls as the declared
    family fills (missing comparisons count as the largest p's) and never below the unadjusted `p`."""
    return record["mean"] > 0 and record.get("p", record["p_holm"]) < 0.05


def _verdict(record: dict) -> str:
    if not _holds(record):
        return "no difference resolved"
    return "holds, above" if record["mean"] > 0 else "holds, below"


def _explored(cell_name: str) -> str:
    """Item 6's setting on the exploration seeds it was found on, for comparison with its confirmation."""
    explored = load("credit_methods.exploration")
    entry = explored["cells"].get(cell_name, {}).get("arms", {}).get(CM_SETTING)
    if not entry:
        return ""
    share, found = entry["heldout"]["share_of_process_ceiling"], entry["heldout"]["minus_none"]
    fresh = load("credit_methods.item6")["cells"][cell_name]["arms"][CM_SETTING]["heldout"]["minus_none"]
    return (f" On the {found['n_seeds']} exploration seeds it was found on it gained {ci(found)}"
            + (f", {share['mean']:.2f} of the ceiling" if share else "")
            + ("; less on the fresh seeds (a search's winner, measured again)." if fresh["mean"] < found["mean"]
               else "."))  # fmt: skip


_GRPO_DISTILL = ("grpo-distill-0.25", "grpo-distill-0.5")
_GEAR_DISTILL = ("gear-distill-0.25", "gear-distill-0.5")
_OTHER_ARMS = {
    "gear": "GEAR at the paper's values",
    "rlsd-reference": "RLSD's reference schedule",
    "sdpo-trl": "TRL's `SDPOTrainer` as it ships",
    "sdpo-trl-solution": "the same with the solution as its context",
    "gigpo": "GiGPO",
    "gear-gigpo": "GEAR + GiGPO",
}


def _arm_phrase(data: dict, arm: str) -> str:
    """`<what> <difference> (Holm p, verdict[, share of the ceiling])` for one arm of a complete cell."""
    entry = data["arms"][arm]["heldout"]
    share = entry["share_of_process_ceiling"]
    what, diff = _OTHER_ARMS.get(arm, f"`{arm}`"), entry["minus_none"]
    share_text = f", {share['mean']:.2f} of the ceiling" if share and diff["mean"] > 0 else ""
    why = ("; the warm starts cannot read its reprompt, `bench/sdpo_teacher.py`"
           if arm.startswith("sdpo-trl") and diff["mean"] < 0 else "")  # fmt: skip
    return f"{what} {ci(diff)} (Holm p {_holm(diff)}, {_verdict(diff)}{share_text}{why})"


def _whose(data: dict) -> str:
    """The cell's answer in the declaration's terms (its outcomes 1-3 need two cells; this is one cell's part)."""
    if _attribution_holds(data):
        return "GEAR's weights add to the distillation on this cell."
    distill = [a for a in _GRPO_DISTILL if a in data["arms"]]
    held = [a for a in distill if _gains(data["arms"][a]["heldout"]["minus_none"])]
    phrases = "; ".join(_arm_phrase(data, a) for a in distill)
    if held:
        return f"GRPO + distillation over GRPO: {phrases}. On this cell the gain is the distillation's."
    room = ""
    costs = [a for a in (*_GRPO_DISTILL, *_GEAR_DISTILL) if a in data["arms"] and _loses(data["arms"][a]["heldout"]["minus_none"])]  # fmt: skip
    if costs:  # where a blend costs accuracy, say so plainly; the GRPO blends' figures are given just above
        named = [f"`{a}`" if a in _GRPO_DISTILL else f"`{a}` {ci(data['arms'][a]['heldout']['minus_none'])} "
                 f"(Holm p {_holm(data['arms'][a]['heldout']['minus_none'])})" for a in costs]  # fmt: skip
        room = f" Self-distillation costs held-out accuracy here: {'; '.join(named)} below GRPO."
    if CM_CEILING in data["arms"] and not _ceiling_resolved(data):
        room += (f" The process ceiling itself is not resolved above GRPO here "
                 f"({ci(data['arms'][CM_CEILING]['heldout']['minus_none'])}): the cell leaves little for any credit "
                 "scheme to gain.")  # fmt: skip
    return f"GRPO + distillation over GRPO: {phrases}. Neither part resolved a gain on this cell.{room}"


def _declared_outcome(declared: dict) -> str:
    """The declaration's outcomes 1-3 (bench/results/credit_methods/declaration.md), per weight w, from the complete
    cells: decided once no pending cell could change it (each needs two cells), else the counts so far."""
    cells, pending = declared["cells"], len(declared["cells_pending"])

    def records(w: str) -> tuple[list[dict], list[dict]]:
        adds = [d["attribution"][f"distillation_weight={w}"]["heldout"] for d in cells.values()]
        distill = [d["arms"][f"grpo-distill-{w}"]["heldout"]["minus_none"] for d in cells.values()]
        return adds, distill

    def reachable(recs: list[dict]) -> int:  # cells where it holds now, or could once the pending cells enter Holm
        return sum(map(_may_gain, recs)) + pending if pending else sum(map(_gains, recs))

    weights = ("0.25", "0.5")
    recs = {w: records(w) for w in weights}
    tally = {w: (sum(map(_gains, a)), sum(map(_gains, d))) for w, (a, d) in recs.items()}
    so_far = "; ".join(f"at {w} GEAR's weights add in {a} and GRPO + distillation holds over GRPO in {d}"
                       for w, (a, d) in tally.items())  # fmt: skip
    head = f"{len(cells)} of {len(cells) + pending} cells done ({so_far})"
    adds = [w for w, (a, _) in tally.items() if a >= 2]
    if adds:
        return f"{head}: outcome 1, GEAR's weights add to the distillation at {' and '.join(adds)}"
    if any(reachable(a) >= 2 for a, _ in recs.values()):
        return f"{head}: not decided yet; every outcome needs two cells"
    distill = [w for w, (_, d) in tally.items() if d >= 2]
    if distill:
        chosen = (declared.get("recommendation") or {}).get("arm")
        pick = (f" (both weights qualify; amendment 5 picks `{chosen}`: more cells held, then the higher average)"
                if len(distill) > 1 and chosen else "")  # fmt: skip
        return (f"{head}: outcome 2, the gain is the distillation's; the recommendation is GRPO + distillation "
                f"at {' and '.join(distill)}{pick}")  # fmt: skip
    if any(reachable(d) >= 2 for _, d in recs.values()):
        return f"{head}: GEAR's weights cannot hold on two cells; whether GRPO + distillation does is not decided yet"
    return f"{head}: outcome 3, no setting is recommended; the recipes keep the paper's defaults"


def _family_d(declared: dict) -> tuple[list[str], list[str]]:
    """Amendment 5's family D as phrases (`<field arm> at <cell> <difference> (Holm p)`): (those that beat the
    recommended arm, the rest); both empty without a follow-up."""
    beats, rest = [], []
    for cell_name, arms in (declared.get("followup") or {}).items():
        for arm, entry in arms.items():
            text = f"{_OTHER_ARMS.get(arm, arm)} at `{cell_name}` {ci(entry['heldout'])} (Holm p {_holm(entry['heldout'])})"
            (beats if entry["heldout"]["beats"] else rest).append(text)
    return beats, rest


def _field_versus_recommended(declared: dict) -> str:
    """Outcome 4 (amendment 5's family D): where a field implementation beats the recommended setting, the docs say it
    is the better choice there; elsewhere each difference, plainly."""
    chosen = declared["recommendation"]["arm"]
    beats, rest = _family_d(declared)
    head = f"the field's implementations minus `{chosen}`, held-out, Holm within family D"
    if beats:
        return (f"{head}: outcome 4, the field's implementation is the better choice where it beats it: "
                f"{'; '.join(beats)}" + (f". No difference above 0 resolved for {'; '.join(rest)}" if rest else ""))  # fmt: skip
    return f"{head}: none beats it ({'; '.join(rest)}), so outcome 4 does not apply"


def _item6_outcome(item6: dict) -> str:
    """Amendment 2's outcomes 1-2 (`_item6_decision`) and, once every cell is read, its outcome 3 per cell."""
    cells, pending = item6["cells"], len(item6["cells_pending"])
    if not pending:  # amendment 2's outcome 3, per cell, once all are read
        versus = _agreement_versus_log_ratio(cells)
        return f"{_item6_decision(item6)}. {versus[0].upper()}{versus[1:]}"
    return _item6_decision(item6)


def _agreement_versus_log_ratio(cells: dict) -> str:
    """Amendment 2's outcome 3 said plainly: where `grpo-agree-0.5 - grpo-distill-0.5` holds, the gain over
    self-distillation is the agreement term's; elsewhere no difference between the two terms was resolved."""
    holds = {c: _gains(d["attribution"]["distillation_signal"]["heldout"]) for c, d in cells.items()}
    above = [f"`{c}`" for c, h in holds.items() if h]
    rest = [f"`{c}`" for c, h in holds.items() if not h]
    parts = []
    if above:
        parts.append(f"against SDPO's log-ratio at the same weight the agreement term holds above at {', '.join(above)}"
                     ": there the gain over self-distillation is the agreement term's")  # fmt: skip
    if rest:
        parts.append(f"at {', '.join(rest)} no difference between the two terms was resolved")
    return "; ".join(parts)


def _item6_decision(item6: dict) -> str:
    """Amendment 2's outcomes 1-2 from item 6's complete cells: reaches 80% of the ceiling in two cells; failing that
    only because the other cells have no ceiling above GRPO, the recommendation follows `grpo-agree-0.5 - none`
    holding (above 0) in two. A cell with a ceiling where the setting falls short is neither outcome: said so."""
    cells, pending = item6["cells"], len(item6["cells_pending"])
    reaches = [c for c, d in cells.items() if d["reaches_80"]]
    gains = [c for c, d in cells.items() if _gains(d["arms"][CM_SETTING]["heldout"]["minus_none"])]
    ceilings = [c for c, d in cells.items() if d["arms"][CM_SETTING]["heldout"]["share_of_process_ceiling"]]
    head = (f"{len(cells)} of {len(cells) + pending} cells done: reaches 80% in {len(reaches)}, a ceiling above GRPO "
            f"in {len(ceilings)}, holds over GRPO in {len(gains)}")  # fmt: skip
    if len(reaches) >= 2:
        return f"{head}: item 6 is met; `{CM_SETTING}` becomes the recommendation for reference-teacher runs"
    if len(reaches) + pending >= 2:
        return f"{head}: not decided yet"
    short = [f"`{c}`" for c in ceilings if c not in reaches]
    if short:
        return (f"{head}: item 6 is not met, and since it falls short of a ceiling above GRPO at {', '.join(short)}, "
                "amendment 2's outcome 2 (no ceiling elsewhere) does not apply; no recommendation follows from item 6")  # fmt: skip
    if len(gains) >= 2:
        return (f"{head}: item 6 is not met (no second cell can reach 80%), but the gain over GRPO holds in two cells, "
                f"so `{CM_SETTING}` becomes the recommendation for reference-teacher runs")  # fmt: skip
    if len(gains) + pending >= 2:
        return f"{head}: item 6 is not met (no second cell can reach 80%); the recommendation is not decided yet"
    return f"{head}: item 6 is not met and the gain over GRPO does not hold in two cells; nothing is recommended"


def credit_methods_item6_lead() -> str:
    """The page's opening line on item 6: how many of its cells reach 80% of the ceiling, and whether it is met."""
    item6 = load("credit_methods.item6")
    cells, total = item6["cells"], len(item6["runs_declared"])
    reaches = sum(d["reaches_80"] for d in cells.values())
    if item6["cells_pending"]:
        return f"`{CM_SETTING}` reaches 80% of the ceiling in {reaches} of {len(cells)} cells read ({total} declared)"
    return (f"`{CM_SETTING}` reaches 80% of the ceiling in {reaches} of {total} cells: "
            + ("met" if reaches >= 2 else "not met, so nothing is recommended from it"))  # fmt: skip


CM_DYNAMICS_ARM = "grpo-distill-0.5"
"""The arm whose training series the page's Open section describes: SDPO's log-ratio at the larger weight."""


def credit_methods_dynamics() -> str:
    """The Open section's description of how `CM_DYNAMICS_ARM` trains in each complete cell, from `dynamics` in
    credit_methods.json (seed means, descriptive: no declared comparison): its held-out accuracy beside GRPO's, and
    its distillation share and training reward over the first steps and the final window."""
    dynamics = load("credit_methods").get("dynamics") or {"cells": {}}
    parts = []
    for cell, arms in dynamics["cells"].items():
        mine, grpo = arms.get(CM_DYNAMICS_ARM), arms.get("none")
        if not mine or not grpo or None in (mine["distill_share"]["first"], mine["distill_share"]["last"]):
            continue
        share, reward = mine["distill_share"], mine["reward"]
        parts.append(f"`{cell}`: held-out {mine['heldout']:.2f} (GRPO {grpo['heldout']:.2f}), share "
                     f"{share['first']:.2f} to {share['last']:.2f}, training reward {reward['first']:.2f} to "
                     f"{reward['last']:.2f} (GRPO's {grpo['reward']['first']:.2f} to {grpo['reward']['last']:.2f})")  # fmt: skip
    if not parts:
        return "no complete cell yet"
    seeds = min(arms[CM_DYNAMICS_ARM]["n_seeds"] for arms in dynamics["cells"].values() if CM_DYNAMICS_ARM in arms)
    return (f"`{CM_DYNAMICS_ARM}`, means of {seeds} seeds, the share and reward over the first {dynamics['opening']} "
            f"logged steps, then the last {dynamics['window']}: " + "; ".join(parts))


def credit_methods_findings() -> str:
    """What the complete cells say, in the declaration's terms; the cells still running are named."""
    declared, item6 = load("credit_methods"), load("credit_methods.item6")
    lines = []
    for cell_name, data in declared["cells"].items():
        parts = [f"w = {key.split('=')[1]}: {ci(e['heldout'])} (Holm p {_holm(e['heldout'])}, {_verdict(e['heldout'])})"
                 for key, e in data["attribution"].items()]  # fmt: skip
        lines.append(f"- **`{cell_name}`, whose gain:** GEAR + distillation minus GRPO + distillation at the same "
                     f"weight, held-out: {'; '.join(parts)}. {_whose(data)}")  # fmt: skip
        lines.append(f"- **`{cell_name}`, the other arms over GRPO (held-out):** "
                     + "; ".join(_arm_phrase(data, arm) for arm in _OTHER_ARMS if arm in data["arms"]) + ".")
    for cell_name, data in item6["cells"].items():
        agree = data["arms"][CM_SETTING]["heldout"]
        ceiling = data["arms"][CM_CEILING]["heldout"]["minus_none"]
        versus = data["attribution"]["distillation_signal"]["heldout"]
        share = agree["share_of_process_ceiling"]
        share_text = (f"{share['mean']:.2f} [{share['ci_low']:.2f}, {share['ci_high']:.2f}] of it" if share
                      else "no share (the ceiling's interval does not lie above 0)")  # fmt: skip
        if share and share["ci_high"] - share["ci_low"] > 1:  # a ratio over a small ceiling: say why it is so wide
            share_text += " (the ceiling is small here, so the share's interval is wide)"
        lines.append(
            f"- **`{cell_name}`, item 6 (seeds {_seeds(item6)}):** `{CM_SETTING}` "
            f"{'reaches' if data['reaches_80'] else 'does not reach'} 80% of the process ceiling: "
            f"{ci(agree['minus_none'])} held-out over GRPO (Holm p {_holm(agree['minus_none'])}), the ceiling "
            f"{ci(ceiling)}, {share_text}; against `{CM_CONTROL}` (SDPO's log-ratio at the same weight) {ci(versus)} "
            f"(Holm p {_holm(versus)}, {_verdict(versus)}).{_explored(cell_name)}"
        )
    if declared["cells"]:
        state = "decides so far" if declared["cells_pending"] else "decided"
        lines.append(f"- **What the declaration {state}:** {_declared_outcome(declared)}.")
    if declared.get("followup"):
        lines.append(f"- **Outcome 4 (amendment 5):** {_field_versus_recommended(declared)}.")
    if item6["cells"]:
        state = "so far" if item6["cells_pending"] else "decided"
        lines.append(f"- **Item 6 (amendment 2), {state}:** {_item6_outcome(item6)}.")
    pending = [f"`{c}` ({n} of {declared['runs_declared'][c]})" for c, n in declared["cells_pending"].items()]
    pending += [f"`{c}`, item 6 ({n} of {item6['runs_declared'][c]})" for c, n in item6["cells_pending"].items()]
    if pending:
        lines.append(f"- **Still running** (runs in; no figure of a cell is read before all its runs are in): "
                     f"{', '.join(pending)}.")  # fmt: skip
    return "\n".join(lines)


def credit_methods_equivalence() -> str:
    """Issue 73 item 5: per complete cell and weight, GEAR + distillation minus GRPO + distillation as an equivalence
    bound (two one-sided tests, `equivalence` in credit_methods.json), held-out primary, reward beside it; the margin
    and that it was chosen after the study was read, said first."""
    eq = load("credit_methods").get("equivalence")
    if not eq:
        return "Not computed yet: every declared cell must be in."
    margin = eq["margin"]
    weights = list(margin["heldout"])
    margins = ", ".join(f"+-{margin['heldout'][w]:.3f} at w = {w}" for w in weights)
    rewards = ", ".join(f"+-{margin['reward'][w]:.3f}" for w in weights)
    lines = [
        (
            f"Margin, chosen **after** the study was read (its declaration names no minimum effect): half of what GRPO "
            f"+ distillation gains over GRPO at the same weight on `{margin['cell']}`, the one cell where it gains: "
            f"held-out {margins} (reward {rewards}). GEAR's weights would matter if they moved the result by half of "
            "what the distillation itself adds. Equivalent: the 90% t-interval of the paired difference lies inside "
            "the margin (both one-sided p < 0.05), Holm over the 8 comparisons per metric."
        ),
        "",
    ]
    counts = {name: [0, 0] for name in ("heldout", "reward")}
    for cell_name, weights_of in eq["cells"].items():
        parts = []
        for key, entry in weights_of.items():
            held, rew = entry["heldout"], entry["reward"]
            for name, rec in (("heldout", held), ("reward", rew)):
                counts[name][0] += rec["equivalent"]
                counts[name][1] += 1
            verdict = "equivalent" if held["equivalent"] else "not shown equivalent"
            parts.append(f"w = {key.split('=')[1]}: {held['mean']:+.3f}, 90% [{held['ci_low']:+.3f}, "
                         f"{held['ci_high']:+.3f}] against +-{held['margin']:.3f}, {verdict} (TOST Holm p "
                         f"{_holm(held)}; reward {'equivalent' if rew['equivalent'] else 'not shown equivalent'}, "
                         f"Holm p {_holm(rew)})")  # fmt: skip
        lines.append(f"- **`{cell_name}`:** " + "; ".join(parts) + ".")
    held_in, held_of = counts["heldout"]
    misses = []
    for cell_name, weights_of in eq["cells"].items():
        for key, entry in weights_of.items():
            rec = entry["heldout"]
            if rec["equivalent"]:
                continue
            side = ("its 90% interval lies below 0: there GEAR's weights do worse, not nothing" if rec["ci_high"] < 0
                    else "its 90% interval lies above 0" if rec["ci_low"] > 0
                    else "its 90% interval reaches past the margin")  # fmt: skip
            misses.append(f"`{cell_name}` at w = {key.split('=')[1]} ({side})")
    lines.append(f"- **In all:** GEAR's weights are shown to change held-out accuracy by less than half the "
                 f"distillation's own gain in {held_in} of {held_of} comparisons"
                 + (f"; not shown at {'; '.join(misses)}." if misses else "."))  # fmt: skip
    return "\n".join(lines)


def _best_real_arm(data: dict) -> tuple[str, dict]:
    """A complete cell's real arm (not the ceiling) with the highest held-out mean over GRPO."""
    real = {a: e for a, e in data["arms"].items() if a != CM_CEILING}
    name = max(real, key=lambda a: real[a]["heldout"]["minus_none"]["mean"])
    return name, real[name]["heldout"]


def _attribution_holds(data: dict) -> bool:
    return any(_gains(e["heldout"]) for e in data["attribution"].values())


def config_attribution() -> str:
    """docs/configuration.md's account of whose gain the blend is, per complete cell of the declared study."""
    declared = load("credit_methods")
    parts = []
    for cell_name, data in declared["cells"].items():
        weights = ", ".join(f"{ci(e['heldout'])} at {key.split('=')[1]} (Holm p {_holm(e['heldout'])})"
                            for key, e in data["attribution"].items())  # fmt: skip
        parts.append(f"At `{cell_name}` (seeds {_seeds(declared)}) GEAR + distillation minus GRPO + distillation "
                     f"is {weights} held-out. {_whose(data)}")  # fmt: skip
    pending = ", ".join(f"`{c}`" for c in declared["cells_pending"])
    return " ".join(parts) + (f" Still running: {pending}." if pending else "")


DISTILL_RECIPES = "`recipes/Qwen3-4B/grpo_distill/` and `recipes/Qwen3-8B/grpo_distill/`"
"""Where outcome 2's recommendation ships (issue 51 item 8): the GRPO recipes with self-distillation turned on."""


def config_recommendation() -> str:
    """What the declared study decides for the Qwen3 recipes (issue 51 item 8), from `recommendation` in
    credit_methods.json: not yet, while a cell is running; outcome 2's arm and its recipes; or that nothing is
    recommended. tests/test_recipe_provenance.py checks the recipes against the same record."""
    declared = load("credit_methods")
    pending = [f"`{c}`, {n} of {declared['runs_declared'][c]} runs in" for c, n in declared["cells_pending"].items()]
    if pending:
        return (f"Not decided yet (still running: {'; '.join(pending)}). Until every declared cell is in, nothing is "
                "recommended over the paper's GEAR, and the recipes keep it")  # fmt: skip
    chosen = declared["recommendation"]
    arm, cells = chosen["arm"], declared["cells"]
    if arm is None:
        held = {w: [f"`{c}`" for c, d in cells.items() if _gains(d["arms"][f"grpo-distill-{w}"]["heldout"]["minus_none"])]
                for w in ("0.25", "0.5")}  # fmt: skip
        where = "; ".join(f"at {w} in {len(c)} ({', '.join(c) or 'none'})" for w, c in held.items())
        adds = sum(_attribution_holds(d) for d in cells.values())
        return (f"No setting is recommended (the declaration's outcome 3): GRPO + distillation holds over GRPO on "
                f"fewer than two of the {len(cells)} cells at either weight ({where}), and GEAR's weights add to the "
                f"same distillation on {adds or 'none'}. The recipes keep the paper's GEAR; `distillation_weight` "
                "stays an option")  # fmt: skip
    weight = arm.rsplit("-", 1)[1]
    if chosen["outcome"] != 2:
        return (f"Recommended (the declaration's outcome {chosen['outcome']}): `{arm}`, GEAR + distillation at "
                f"`distillation_weight: {weight}`. No recipe variant ships for it yet")  # fmt: skip
    records = {c: d["arms"][arm]["heldout"]["minus_none"] for c, d in cells.items()}
    held = [f"`{c}` {ci(r)}" for c, r in records.items() if _gains(r)]
    lost = [f"`{c}` {ci(r)}" for c, r in records.items() if _loses(r)]
    tied = [f"`{c}` {ci(r)}" for c, r in records.items() if not _holds(r)]
    adds = sum(_attribution_holds(d) for d in cells.values())
    seeds = min(r["n_seeds"] for r in records.values())
    return (f"**Recommended: GRPO + self-distillation, `credit: none` with `distillation_weight: {weight}`** and the "
            f"teacher shown the task's reference (the declaration's outcome 2): held-out over GRPO it gains on "
            f"{len(held)} of {len(cells)} cells ({'; '.join(held)}; Holm p < 0.05, {seeds} seeds each)"
            + (f", loses on {len(lost)} ({'; '.join(lost)})" if lost else "")
            + (f", ties on {len(tied)} ({'; '.join(tied)})" if tied else "")
            + f"; there is no evidence that GEAR's weights add to self-distillation (they add on {adds} of {len(cells)} "
            "cells, the declaration asks for two). Recipes: "
            f"{DISTILL_RECIPES}, the GRPO recipes with this teacher block. The evidence is a 1.3M-parameter model's "
            "tasks; nothing was measured at Qwen3 scale" + _field_beats(declared))  # fmt: skip


def _field_beats(declared: dict) -> str:
    """Outcome 4 for the recommendation: where a field implementation beats the recommended arm (family D), it is the
    better choice there; empty where none does."""
    beats, _ = _family_d(declared)
    if not beats:
        return ""
    return f". Outcome 4: the field's implementation is the better choice where it beats it: {'; '.join(beats)}"


def readme_demo_attribution() -> str:
    """The demo's setting (`gear-distill-0.25` at `independent-k8`) against GRPO with the same distillation, from the
    declared study: whose gain the demo shows. Empty-handed while that cell is not in."""
    cell = load("credit_methods")["cells"].get("independent-k8")
    if not cell:
        return "the credit-methods study has not yet read this cell"
    entry = cell["attribution"]["distillation_weight=0.25"]["heldout"]
    alone = cell["arms"]["grpo-distill-0.25"]["heldout"]["minus_none"]
    if _gains(entry):
        verdict = "GEAR's weights add to the distillation"
    elif _gains(alone):
        verdict = (f"no difference resolved, and GRPO with that distillation gains {ci(alone)} over GRPO: the gain is "
                   "the distillation's, not GEAR's weighting")  # fmt: skip
    else:
        verdict = "no difference resolved"
    return (f"GEAR + distillation minus GRPO with the same distillation (`credit: none`, `distillation_weight: 0.25`) "
            f"is {ci(entry)} held-out on {entry['n_seeds']} fresh seeds (Holm p {_holm(entry)}): {verdict}")


def readme_credit_methods() -> str:
    """At most 24 words (the README row's 30 with its link): how many of the declared study's cells are read, whether
    GEAR's weights add to the same distillation there (Holm p < 0.05, above 0, at either weight), and in how many
    GRPO + distillation beats GRPO or loses to it (either weight); with one cell read, its best real arm and share."""
    declared = load("credit_methods")
    cells, total = declared["cells"], len(declared["runs_declared"])
    if not cells:
        return f"0 of {total} cells done"
    adds = sum(_attribution_holds(data) for data in cells.values())
    head = f"{len(cells)} of {total} cells read: "  # the page names them; the row's budget is 30 words with its link
    verdict = ("GEAR's weights add nothing resolved to the same distillation" if not adds
               else f"GEAR's weights add to the same distillation in {adds} of {len(cells)} cells")  # fmt: skip
    if len(cells) > 1:
        distill = sum(any(_gains(d["arms"][a]["heldout"]["minus_none"]) for a in _GRPO_DISTILL) for d in cells.values())
        loses = sum(any(_loses(d["arms"][a]["heldout"]["minus_none"]) for a in _GRPO_DISTILL) for d in cells.values())
        return f"{head}{verdict}; GRPO + distillation beats GRPO in {distill}" + (f", loses in {loses}" if loses else "")
    best, entry = _best_real_arm(next(iter(cells.values())))
    share = entry["share_of_process_ceiling"]
    return (f"{head}{verdict}; best: `{best}` {ci(entry['minus_none'])}"
            + (f", {share['mean']:.2f} of the ceiling" if share else ""))  # fmt: skip


BLOCKS = {
    "credit_methods.table": credit_methods_table,
    "credit_methods.findings": credit_methods_findings,
    "credit_methods.item6_lead": credit_methods_item6_lead,
    "credit_methods.dynamics": credit_methods_dynamics,
    "credit_methods.equivalence": credit_methods_equivalence,
    "readme.credit_methods": readme_credit_methods,
    "readme.demo_attribution": readme_demo_attribution,
    "config.agreement": config_agreement,
    "config.attribution": config_attribution,
    "config.recommendation": config_recommendation,
    "config.sdpo_teacher": config_sdpo_teacher,
    "config.drop_prefix": config_drop_prefix,
    "config.distill": config_distill,
    "started.paired": started_paired,
    "horizon.table": horizon_table,
    "horizon.findings": horizon_findings,
    "horizon.cost": horizon_cost,
    "horizon.k16": horizon_k16,
    "readme.horizon": readme_horizon,
    "headroom.table": headroom_table,
    "headroom.findings": headroom_findings,
    "headroom.arith_start": headroom_arith_start,
    "readme.learning": readme_learning,
    "learning.table": learning_table,
    "learning.findings": learning_findings,
    "learning.lrprobe": learning_lrprobe,
    "readme.tools": readme_tools,
    "readme.sweep": readme_sweep,
    "teacher_sweep.table": teacher_sweep_table,
    "teacher_sweep.findings": teacher_sweep_findings,
    "readme.headroom": readme_headroom,
    "readme.perf_cpu": readme_perf_cpu,
    "readme.perf_gpu": readme_perf_gpu,
    "performance.table": performance_table,
    "performance.findings": performance_findings,
    "performance.gpu": performance_gpu,
    "performance.host": performance_host,
}


# ---------------------------------------------------------------------------------------------------------------------
# Rewriting and checking the files
# ---------------------------------------------------------------------------------------------------------------------


def render(text: str) -> str:
    """`text` with every block's content regenerated; a block written on its own lines stays on its own lines."""

    def fill(match: re.Match) -> str:
        name, old = match.group(1), match.group(2)
        if name not in BLOCKS:
            raise KeyError(f"no generator for block {name!r}: add it to BLOCKS in docs/results_blocks.py")
        new = BLOCKS[name]()
        if old.startswith("\n"):
            new = f"\n{new}\n"
        return f"<!-- gen:{name} -->{new}<!-- /gen -->"

    return BLOCK.sub(fill, text)


def stale() -> list[str]:
    """The files in FILES whose blocks differ from what the JSON gives."""
    return [name for name in FILES if render(text := (REPO / name).read_text(encoding="utf-8")) != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help="rewrite every block in place")
    parser.add_argument("--check", action="store_true", help="exit 1 if a block is stale")
    args = parser.parse_args(argv)
    if args.write:
        for name in FILES:
            path = REPO / name
            text = path.read_text(encoding="utf-8")
            if (new := render(text)) != text:
                path.write_text(new, encoding="utf-8")
                print(f"rewrote {name}")
        return 0
    if bad := stale():
        print(f"stale generated blocks in {', '.join(bad)}: run `{REFRESH}`", file=sys.stderr)
        return 1
    print("every generated block is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
