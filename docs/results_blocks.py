"""Generated tables: every figure the results pages, the README and the guides show, written from the committed JSON.

A Markdown file holds a table as

    <!-- gen:horizon.table -->
    ...the generated table...
    <!-- /gen -->

and, where hand-written prose quotes one of its figures, the figure as a cell read from a table:

    exact per-decision credit beats it (<!-- gen:horizon.table[oracle-process][held-out - GRPO] -->...<!-- /gen -->)

The row key names the one row whose cells include each of its ` & `-separated parts (backticks aside); the column key
is a header, or the start of exactly one header. `TABLES[name]()` gives a table; `python -m docs.results_blocks
--write` rewrites every block of every file in `FILES` in place; `python -m docs.results_blocks --check` (and
tests/project/test_results_blocks.py) fails where a block differs from what the JSON gives. Prose around a block is written by
hand and states no figure of its own: a finding that needs words says them in the page, and its figures are the
tables' (or cells read from them).

Plain code: the standard library and the files in `PATHS` only (no bench import), so the module loads the way
docs/hooks.py is loaded, by file path, or as `python -m docs.results_blocks` from the repository root.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from functools import cache
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[1]

# Every file a table reads, in one place: when bench/results/ is reorganized, remap them here. All are JSON but
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
    "distill_bounds": "bench/results/distill_bounds/distill_bounds.json",  # issue 73's confirmation, seeds 300-315
    "distill_bounds.declaration": "bench/results/distill_bounds/declaration.json",
    "pretrained_credit": "bench/results/pretrained_credit/pretrained_credit.json",  # issue 72, seeds 400-415
    "pretrained_credit.declaration": "bench/results/pretrained_credit/declaration.json",
}

# The files whose blocks `--write` rewrites and the test checks.
FILES = (
    "README.md",
    "docs/results/index.md",
    "docs/results/credit-methods.md",
    "docs/results/distill-bounds.md",
    "docs/results/pretrained-credit.md",
    "docs/results/horizon.md",
    "docs/results/headroom.md",
    "docs/results/learning.md",
    "docs/results/performance.md",
    "docs/results/teacher-sweep.md",
    "docs/configuration.md",
    "docs/getting-started.md",
)

BLOCK = re.compile(r"<!-- gen:([a-z0-9_.]+)(?:\[([^\]]+)\]\[([^\]]+)\])? -->(.*?)<!-- /gen -->", re.DOTALL)
REFRESH = "python -m docs.results_blocks --write"


@cache
def load(key: str) -> dict:
    return json.loads((REPO / PATHS[key]).read_text(encoding="utf-8"))


class Table(NamedTuple):
    header: list[str]
    rows: list[list[str]]

    def markdown(self) -> str:
        lines = [f"| {' | '.join(self.header)} |", "|" + "---|" * len(self.header)]
        return "\n".join(lines + [f"| {' | '.join(row)} |" for row in self.rows])

    def cell(self, row: str, column: str) -> str:
        """The cell of the one row whose cells include every ` & `-separated part of `row` (backticks aside), under
        the header `column`: a header, or the start of one; `a > b` is the first header `b` after the header `a`."""
        plain = [[c.replace("`", "").strip() for c in r] for r in self.rows]
        found = [i for i, cells in enumerate(plain) if all(p.strip() in cells for p in row.split(" & "))]
        headers = [h.replace("`", "").strip() for h in self.header]
        at = 0
        for part in (p.strip() for p in column.split(" > ")):
            columns = [i for i, h in enumerate(headers) if i >= at and h == part] or [
                i for i, h in enumerate(headers) if i >= at and h.startswith(part)
            ]
            at = columns[0] if columns else len(headers)
        if len(found) != 1 or not columns or (" > " not in column and len(columns) != 1):
            raise KeyError(f"[{row}][{column}]: {len(found)} rows and {len(columns)} columns match, not one of each")
        return self.rows[found[0]][at]


# ---------------------------------------------------------------------------------------------------------------------
# Statistics: the paired t-interval of gear_trl.table
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


def _ms(x: dict, digits: int = 3) -> str:
    return f"{x['mean']:.{digits}f} ± {x['std']:.{digits}f}"


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


def blend_minus_signed(metric: str = HELD) -> dict:
    """`gear-distill` - `gear-signed` paired by seed over seeds 0-31 (both ran in the study and its first two
    replications)."""
    blend, signed = pooled("gear-distill", SIGNED_KEYS, metric), pooled("gear-signed", SIGNED_KEYS, metric)
    return paired([a - b for a, b in zip(blend["values"], signed["values"], strict=True)])


DISTILL_KEYS = ("horizon", "horizon.rep1", "horizon.rep2", "horizon.rep3_weights")  # gear-distill: seeds 0-47
SIGNED_KEYS = ("horizon", "horizon.rep1", "horizon.rep2")  # gear-signed: seeds 0-31
LIGHT_KEYS = ("horizon", "horizon.rep3")  # gear-distill-0.25: seeds 0-7 and 32-47


def horizon_table() -> Table:
    """The page's one table, independent K = 8: (arm, what it is, seeds, held-out - none, reward - none)."""

    def own(name, key="horizon"):
        body = arm(name, key=key)
        return body[HELD], body[REWARD]

    rows = [
        ("`oracle-process`", "label oracle: each decision's own correctness as its advantage", "0-7", *own("oracle-process")),
        ("`oracle-gear`", "label oracle: GEAR's weighting fed perfect labels", "0-7", *own("oracle-gear")),
        ("`gear-solution`", "GEAR at its defaults, teacher shown the solution", "0-7", *own("gear-solution")),
        ("`gear-distill-0.25`", "`gear-solution` + `distillation_weight: 0.25`", "32-47 (declared test)",
         *own("gear-distill-0.25", "horizon.rep3")),
        ("`gear-distill-0.25`", "the same", "0-7 and 32-47 pooled",
         pooled("gear-distill-0.25", LIGHT_KEYS), pooled("gear-distill-0.25", LIGHT_KEYS, REWARD)),
        ("`gear-distill`", "`gear-solution` + `distillation_weight: 0.5`", "0-47 pooled",
         pooled("gear-distill", DISTILL_KEYS), pooled("gear-distill", DISTILL_KEYS, REWARD)),
        ("`gear-distill-1.0`", "distillation alone (TRL's SDPO default)", "0-7", *own("gear-distill-1.0")),
    ]  # fmt: skip
    return Table(
        ["arm", "what it is", "seeds", "held-out - GRPO", "training reward - GRPO", "seeds above GRPO (held-out)"],
        [[n, w, s, ci(h), ci(r), f"{above(h)} of {h['n_seeds']}"] for n, w, s, h, r in rows],
    )


def horizon_cells() -> Table:
    """Every cell of the study (seeds 0-7): GRPO's own held-out accuracy, the two oracles and GEAR with the solution
    teacher against it, and how often that teacher opens a segment at a failed rollout's first error."""
    rows = []
    for variant, ks in load("horizon")["variants"].items():
        for k, body in ks.items():
            none, arms = body["none_accuracy"], body["arms"]

            def held(name, arms=arms):
                return ci(arms[name][HELD]) if name in arms else "-"

            onset = (arms.get("gear-solution", {}).get("localization") or {}).get("onset_rate")
            rows.append([
                f"`{variant}` K = {k}", f"{none['start']:.3f}",
                f"{none['end']:.3f} [{none['end_ci_low']:.3f}, {none['end_ci_high']:.3f}]",
                held("oracle-process"), held("oracle-gear"), held("gear-solution"),
                "-" if onset is None else f"{onset:.2f}",
            ])  # fmt: skip
    return Table(
        ["cell", "GRPO held-out, start", "GRPO held-out, end", "`oracle-process` - GRPO", "`oracle-gear` - GRPO",
         "`gear-solution` - GRPO", "`gear-solution`: onset at a failed rollout's first error"],
        rows,
    )  # fmt: skip


def horizon_replications() -> Table:
    """Every seed block of the arms replicated at independent K = 8, each block after 0-7 declared before it ran."""
    rows = [
        ("`gear-distill-0.25` - GRPO", "0-7", arm("gear-distill-0.25")[HELD], arm("gear-distill-0.25")[REWARD]),
        ("`gear-distill-0.25` - GRPO", "32-47 (declared)", arm("gear-distill-0.25", key="horizon.rep3")[HELD],
         arm("gear-distill-0.25", key="horizon.rep3")[REWARD]),
        ("`gear-distill-0.25` - GRPO", "0-7 and 32-47 pooled", pooled("gear-distill-0.25", LIGHT_KEYS),
         pooled("gear-distill-0.25", LIGHT_KEYS, REWARD)),
    ]  # fmt: skip
    for name, keys in (("gear-distill", DISTILL_KEYS), ("gear-signed", SIGNED_KEYS)):
        for key in keys:
            seeds = load(key)["config"]["budget"]["seeds"]
            label = f"{seeds[0]}-{seeds[-1]}" + ("" if key == "horizon" else " (declared)")
            rows.append((f"`{name}` - GRPO", label, arm(name, key=key)[HELD], arm(name, key=key)[REWARD]))
        last = load(keys[-1])["config"]["budget"]["seeds"][-1]
        rows.append((f"`{name}` - GRPO", f"0-{last} pooled", pooled(name, keys), pooled(name, keys, REWARD)))
    rows += [
        ("`gear-distill` - `gear-signed`", "0-31 pooled", blend_minus_signed(), blend_minus_signed(REWARD)),
        ("`gear-distill-0.25` - `gear-distill`", "32-47 (declared)", weights_025_minus_05(),
         weights_025_minus_05(REWARD)),
        ("`gear-distill-1.0` - GRPO", "0-7", arm("gear-distill-1.0")[HELD], arm("gear-distill-1.0")[REWARD]),
    ]  # fmt: skip
    return Table(
        ["difference", "seeds", "held-out", "training reward", "seeds above 0 (held-out)"],
        [[d, s, ci(h), ci(r), f"{above(h)} of {h['n_seeds']}"] for d, s, h, r in rows],
    )


def horizon_drop_prefix() -> Table:
    """`failed_prefix_weight: 0` (the arm `gear-drop-prefix`) against GRPO, where it ran."""
    body = arm("gear-drop-prefix", "chained", 4)
    return Table(
        ["arm", "cell", "seeds", "held-out sampled - GRPO", "training reward - GRPO"],
        [["`gear-drop-prefix`", "`chained` K = 4", "0-7", ci(body[HELD]), ci(body[REWARD])]],
    )


def horizon_cost() -> Table:
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
    return Table(
        ["reports", "runs", "CPU-hours", "CPU-seconds a run (one thread)"],
        [["the study and its four replications", str(len(every)), f"{sum(costs) / 3600:.1f}",
          f"{min(costs):.0f}-{max(costs):.0f}"]],
    )  # fmt: skip


def horizon_k16() -> Table:
    scores = load("horizon.k16_start")["variants"]
    return Table(
        ["warm start", "held-out sampled accuracy at K = 16"],
        [[f"`{v}`", f"{scores[v]['accuracy']:.3f}"] for v in ("independent", "chained")],
    )


# ---------------------------------------------------------------------------------------------------------------------
# The headroom study and the teacher sweep
# ---------------------------------------------------------------------------------------------------------------------


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


def headroom_table() -> Table:
    rows = []
    for task, body in load("headroom")["tasks"].items():
        for name, x in body["arms"].items():
            if HELD not in x:
                continue
            loc = x.get("localization") or {}
            onset = ""
            if loc.get("onset_rate") is not None:
                onset = f"{loc['onset_rate']:.2f} ({loc['onset_rate_random']:.2f})"
            moved = f"{loc['moved_share']:.3f}" if loc.get("moved_share") is not None else ""
            rows.append([task, f"`{name}`", ci(x[HELD]), ci(x[REWARD]), onset, moved])
    return Table(
        ["task", "arm", "held-out - GRPO", "training reward - GRPO", "onset at the error (chance)", "mass moved"], rows
    )


def headroom_start() -> Table:
    """Where each task starts and where GRPO ends: the student's held-out accuracy from the study's own evaluation
    (headroom.json), the arith warm start's and its teachers' when it was made (data/README.md)."""
    tasks = load("headroom")["tasks"]
    made = warm_start_row("tiny-qwen3-arith-sol35")
    rows = []
    for task, body in tasks.items():
        start, none = body["start"], body["arms"]["none"]["sampled_accuracy"]
        rows.append([task, "the study's start", str(start["n"]), f"{start['sampled_accuracy']:.3f}",
                     f"{start['greedy_accuracy']:.3f}", "-", "-"])  # fmt: skip
        if task == "arith":
            rows.append([task, "when the warm start was made (data/README.md)", "-", made["sampled"], made["greedy"],
                         made["teacher (answer)"], made["teacher (solution)"]])  # fmt: skip
        rows.append([task, f"GRPO's end (mean of {len(none['values'])} seeds)", str(start["n"]), f"{none['mean']:.3f}",
                     "-", "-", "-"])  # fmt: skip
    return Table(
        ["task", "when", "held-out problems", "student, sampled", "student, greedy", "teacher shown the answer",
         "teacher shown the solution"],
        rows,
    )  # fmt: skip


def teacher_sweep_table() -> Table:
    """One row per teacher: how well it uses the reference, how it localizes, and GEAR - GRPO on both metrics."""
    report = load("teacher_sweep")
    config = report["config"]
    rows = []
    for t in report["teachers"]:
        loc, diag, x = t["localization"], t["diagnostic"], report["paired"][t["name"]]
        rows.append([
            f"`{t['name']}`", f"{t['hint_frac']:.0%}", f"{t['teacher_accuracy']:.2f}",
            f"{t['student_sampled_accuracy']:.2f}", f"{loc['onset_rate']:.2f} ({loc['onset_rate_random']:.2f})",
            f"{diag['kl_failed_over_passed']:.2f}", ci(x["reward_last"]), ci(x["sampled_accuracy"]),
        ])  # fmt: skip
    return Table(
        ["teacher", "SFT rows with the reference", "teacher acc.", "student sampled acc.", "onset at error (chance)",
         "KL failed / passed",
         (f"GEAR - GRPO, training reward (last {config['window']} of {config['max_steps']} steps, "
          f"{len(config['seeds'])} seeds)"),
         "GEAR - GRPO, held-out sampled"],
        rows,
    )  # fmt: skip


def teacher_sweep_weights() -> Table:
    """GEAR's weight variants at the sweep's best teacher, each minus GRPO on the same seeds."""
    sweep = load("teacher_sweep")["sweep"]
    return Table(
        [f"arm, teacher `{sweep['teacher']}`", "- GRPO, training reward", "- GRPO, held-out sampled"],
        [[f"`{a}`", ci(x["reward_last"]), ci(x["sampled_accuracy"])] for a, x in sweep["arms"].items()],
    )


# ---------------------------------------------------------------------------------------------------------------------
# The learning testbeds (chained arithmetic, the calculator tool task)
# ---------------------------------------------------------------------------------------------------------------------

LEARNING = (("arithmetic", "learning"), ("calculator", "learning.tools"))


def learning_minus_none(key: str, mode: str, metric: str) -> dict:
    """`mode` - `none` on `metric`, paired by seed, 95% t-interval."""
    summary = load(key)["summary"]
    mine, grpo = summary[mode], summary["none"]
    assert mine["seeds"] == grpo["seeds"], (key, mode)
    return paired([a - b for a, b in zip(mine[metric]["values"], grpo[metric]["values"], strict=True)])


def learning_table() -> Table:
    rows = []
    for testbed, key in LEARNING:
        report = load(key)
        start = report["start"]["eval"]
        trained = f"{start['train_greedy_accuracy']:.3f}" if "train_greedy_accuracy" in start else "-"
        rows.append([testbed, "warm start", "", f"{start['sampled_accuracy']:.3f}", f"{start['greedy_accuracy']:.3f}",
                     trained, "", ""])  # fmt: skip
        for mode, x in report["summary"].items():
            trained = "-" if math.isnan(x["train_greedy_accuracy"]["mean"]) else _ms(x["train_greedy_accuracy"])
            versus = ["", ""] if mode == "none" else [
                ci(learning_minus_none(key, mode, metric)) for metric in ("reward_last", "sampled_accuracy")
            ]  # fmt: skip
            name = "`none` (GRPO)" if mode == "none" else f"`{mode}`"
            rows.append([testbed, name, _ms(x["reward_last"]), _ms(x["sampled_accuracy"]), _ms(x["greedy_accuracy"]),
                         trained, *versus])  # fmt: skip
    return Table(
        ["testbed", "arm", "training reward", "held-out sampled", "held-out greedy", "trained-on greedy",
         "training reward - GRPO", "held-out sampled - GRPO"],
        rows,
    )  # fmt: skip


def learning_sites() -> Table:
    """Where GEAR's segments open in failed rollouts of each warm start (bench/credit_sites.py)."""
    rows = []
    for testbed, key in (("arithmetic", "credit_sites.arith"), ("calculator", "credit_sites.tools")):
        x = load(key)
        error, random = x["error_site"], x["random_model_token"]
        rows.append([testbed, str(x["rollouts"]), f"{error['onset']:.2f}", f"{random['onset']:.2f}",
                     f"{error['mean_weight_negative_advantage']:.2f}",
                     f"{random['mean_weight_negative_advantage']:.2f}"])  # fmt: skip
    return Table(
        ["warm start", "rollouts", "segment opens at the first wrong token", "at a random token",
         "that token's mean weight (failed, advantage < 0)", "a random token's"],
        rows,
    )  # fmt: skip


def learning_lrprobe() -> Table:
    report = load("learning.tools_lrprobe")
    s = report["summary"]
    return Table(
        ["`none`, learning rate", f"training reward (last {report['config']['window']} steps)", "held-out sampled"],
        [[rate, _ms(s[f"none learning_rate={rate}"]["reward_last"]), _ms(s[f"none learning_rate={rate}"]["sampled_accuracy"])]
         for rate in ("5e-5", "2e-4")],
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# Performance: the overhead of GEAR's teacher pass (bench/overhead.py)
# ---------------------------------------------------------------------------------------------------------------------

PERF_ROWS = (("CPU", "overhead.cpu", "tiny"), ("CPU", "overhead.cpu", "long_prompt"), ("CPU", "overhead.cpu", "vocab"),
             ("one H200 (quick, T = 1,024)", "overhead.cuda_h200", "qwen3-4b"),
             ("one H100 (older: 3c2137a)", "overhead.cuda", "qwen3-4b"))  # fmt: skip


def _target(key: str, name: str, shape: str) -> dict:
    return next(t for t in load(key)["targets"] if t["target"] == name and t["shape"] == shape)


def _perf_cell(key: str, name: str, shape: str, kind: str = "x") -> str:
    found = [t for t in load(key)["targets"] if t["target"] == name and t["shape"] == shape]
    if not found:
        return "-"
    t = found[0]
    value = f"{t['value']:.2f}x" if kind == "x" else f"{t['value']:.2%}" if kind == "%2" else f"{t['value']:.1%}"
    return value if t["holds"] else f"**{value}** (over)"


def _perf_result(key: str, shape: str, arm: str) -> dict:
    return load(key)["shapes"][shape]["results"][arm]


def performance_table() -> Table:
    thresholds = {t["target"]: t["threshold"] for t in load("overhead.cpu")["targets"] if t["shape"] == "tiny"}
    rows = []
    for device, key, shape in PERF_ROWS:
        gear = _perf_result(key, shape, "gear/gear")
        rows.append([device, shape, _perf_cell(key, "step_time", shape), _perf_cell(key, "end_to_end_step_time", shape),
                     f"{gear['user_cpu_ratio_to_grpo']:.2f}x", _perf_cell(key, "extra_peak_memory", shape, "%2"),
                     _perf_cell(key, "divergence_pass_memory", shape, "%")])  # fmt: skip
    return Table(
        ["device", "shape", f"step time (target {thresholds['step_time']}x; 1.15x at long_prompt)",
         f"generation + step (target {thresholds['end_to_end_step_time']}x)", "user CPU time",
         f"extra step peak memory (target {thresholds['extra_peak_memory']:.0%})",
         f"teacher pass's own peak (target {thresholds['divergence_pass_memory']:.0%})"],
        rows,
    )  # fmt: skip


def performance_provenance() -> Table:
    """The GPU runs' machines and software: the H200's (bench/gpu_checks.sh steps 5 and 6 at ce4f9b3,
    bench/results/overhead/h200_provenance.md) and the older H100's."""
    h200, h100 = load("recipe_shape.h200")["meta"], load("overhead.cuda")["meta"]
    return Table(
        ["GPU", "commit", "date", "torch", "transformers", "trl", "peft"],
        [[h200["device"].split(" (")[0], h200["commit"], h200["date"], h200["torch"], h200["transformers"], h200["trl"],
          h200["peft"]],
         [h100["machine"], h100["commit"], h100["date"].split()[0], h100["torch"], h100["transformers"], h100["trl"],
          "-"]],
    )  # fmt: skip


def performance_h200() -> Table:
    results = load("overhead.cuda_h200")["shapes"]["qwen3-4b"]["results"]
    grpo, topk = results["grpo"]["step_s"]["median"], results["sdpo/topk_logits"]["step_s"]["median"]
    rows = []
    for name in ("grpo", "gear/gear", "sdpo/topk_logits", "sdpo/full_logits"):
        x = results[name]
        teacher = x["phases_s"].get("teacher", {}).get("median") if x.get("phases_s") else None
        step = x["step_s"]["median"]
        rows.append([name, f"{step * 1000:.0f} ms", f"{step / grpo:.2f}x", f"{step / topk:.2f}x",
                     f"{teacher * 1000:.0f} ms" if teacher else "-",
                     f"{x['cpu']['user_s']['median'] * 1000:.0f} ms", f"{x['user_cpu_ratio_to_grpo']:.2f}x",
                     f"{x['extra_peak_mb']['step'] / 1024:.2f} GB"])  # fmt: skip
    return Table(
        ["configuration", "step", "x GRPO", "x SDPO top-k", "teacher pass", "host CPU user", "host CPU user, x GRPO",
         "step extra peak"],
        rows,
    )  # fmt: skip


def _recipe_rows() -> dict[tuple[str, str], dict]:
    return {(row["task"], row["method"]): row for row in load("recipe_shape.h200")["rows"]}


def performance_recipes() -> Table:
    """The shipped Qwen3-4B recipes' real step on the H200: GEAR's second step over GRPO's (the first carries
    warm-up)."""
    rows = []
    for task in ("math", "tool_use"):
        grpo, gear = _recipe_rows()[task, "grpo"], _recipe_rows()[task, "gear"]
        share = [s for s in gear["teacher_time_frac"] if s is not None]
        rows.append([task, str(gear["completions_per_step"]), f"{grpo['step_seconds'][-1]:.1f} s",
                     f"{gear['step_seconds'][-1]:.1f} s", f"{gear['step_seconds'][-1] / grpo['step_seconds'][-1]:.2f}x",
                     f"{sum(share) / len(share):.1%}",
                     f"{grpo['peak_memory_gb']:.2f} -> {gear['peak_memory_gb']:.2f} GB"])  # fmt: skip
    return Table(
        ["recipe", "completions a step", "GRPO step 2", "GEAR step 2", "GEAR / GRPO", "teacher's share",
         "peak GRPO -> GEAR"],
        rows,
    )  # fmt: skip


def performance_host() -> Table:
    """GEAR's host-side work per step against GRPO's (bench/results/overhead/host_cost.json), before and after issue
    75's cuts."""
    rows = []
    for label, run in load("overhead.host_cost")["runs"].items():
        configs = run["configs"]
        grpo = configs["grpo"]["totals"]
        for config, result in configs.items():
            if config == "grpo":
                continue
            t = result["totals"]
            own = sum(n for source, n in result["sync_sources"].items() if "gear_trl/" in source)
            teacher = result["regions"]["teacher forward"]["top-level operators"]
            rows.append([
                f"{label} ({run['gear_trl'].split()[0]})", config, f"{t['operators'] / grpo['operators']:.2f}x",
                f"{t['top-level operators'] / grpo['top-level operators']:.2f}x",
                f"{teacher / grpo['top-level operators']:.2f}x",
                (f"{t['synchronizations']} against {grpo['synchronizations']} "
                 f"({t['synchronizations'] / grpo['synchronizations']:.2f}x)"),
                str(own),
            ])  # fmt: skip
    return Table(
        ["gear_trl", "configuration", "operators", "top-level operators", "of which the teacher's forward",
         "synchronizations", "of which GEAR's own"],
        rows,
    )  # fmt: skip


def performance_syncs() -> Table:
    """GEAR's own synchronizations a step after issue 75 (`gear/gpu_path`), by source."""
    sources = load("overhead.host_cost")["runs"]["after"]["configs"]["gear/gpu_path"]["sync_sources"]
    own = sorted(
        ((*source.split(" @ ", 1), n) for source, n in sources.items() if "gear_trl/" in source), key=lambda s: -s[2]
    )
    return Table(
        ["synchronization", "where", "a step"], [[f"`{kind.strip()}`", f"`{where.split(':')[0].strip()}`", str(n)]
                                                 for kind, where, n in own]
    )  # fmt: skip


def performance_teacher_pass() -> Table:
    """GEAR's teacher pass against TRL SDPO's, part by part on the same states (teacher_pass.json)."""
    parts = load("overhead.teacher_pass")["parts"]
    return Table(
        ["part", "median time (CPU)", "top-level operators"],
        [[name, f"{x['median_s'] * 1000:,.0f} ms", f"{x['top_level']:,}"] for name, x in parts.items()],
    )


def performance_h100() -> Table:
    """The older H100 run at Qwen3-4B's shape, T = 4,096 (cuda.json): each configuration's step and peak."""
    report = load("overhead.cuda")["shapes"]["qwen3-4b"]
    rows = []
    for name in ("grpo", "gear/gear", "sdpo/topk_logits", "sdpo/full_logits"):
        x = report["results"][name]
        if "error" in x:
            tensor = report["model"]["one_BxTxV_logits_tensor_gb"]
            rows.append([name, f"out of GPU memory (one `[B, T, V]` tensor is {tensor:.1f} GB)", "", "", ""])
            continue
        teacher = x["phases_s"].get("teacher", {}).get("median") if x.get("phases_s") else None
        rows.append([name, f"{x['step_s']['median']:.2f} s", f"{x['step_ratio_to_grpo']:.2f}x",
                     f"{teacher:.2f} s" if teacher else "-", f"{x['extra_peak_mb']['step'] / 1024:.1f} GB"])  # fmt: skip
    return Table(["configuration", "step", "x GRPO", "teacher pass", "step extra peak"], rows)


def performance_chunks() -> Table:
    """`divergence_chunk_size` on the H100 (cuda_chunk*.json): GEAR's step and its teacher pass's own peak."""
    rows = []
    for chunk in (64, 512, 2048):
        key = f"overhead.cuda_chunk{chunk}"
        rows.append([str(chunk), f"{_target(key, 'step_time', 'qwen3-4b')['value']:.2f}x",
                     f"{_target(key, 'divergence_pass_memory', 'qwen3-4b')['value']:.1%}"])  # fmt: skip
    return Table(["`divergence_chunk_size`", "GEAR's step, x GRPO", "teacher pass's own peak"], rows)


# ---------------------------------------------------------------------------------------------------------------------
# The credit-methods study (issue 51): bench/credit_methods.py writes a report's figures only for the cells whose
# declared runs are all in; the others are listed with their run counts.
# ---------------------------------------------------------------------------------------------------------------------

CM_CEILING, CM_SETTING, CM_CONTROL = "oracle-process", "grpo-agree-0.5", "grpo-distill-0.5"
WEIGHTS = ("0.25", "0.5")
NO_CEILING = "no ceiling (no per-decision labels)"
"""The share column of a cell without `oracle-process` (the declaration: reported as not available, never replaced
by another oracle's share)."""


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
    if not share:
        return ""
    low, high = (("unbounded" if x is None else f"{x:.2f}") for x in (share["ci_low"], share["ci_high"]))
    return f"{share['mean']:.2f} [{low}, {high}]"  # a bound is null where the bootstrap's resamples left it unbounded


def _ceiling_resolved(data: dict) -> bool:
    """Whether a complete cell's process ceiling lies above GRPO (its held-out interval above 0): only then is a
    share of it given. False for a cell with no ceiling arm (`calculator`: no per-decision labels)."""
    return CM_CEILING in data["arms"] and data["arms"][CM_CEILING]["heldout"]["minus_none"]["ci_low"] > 0


def _arm_share(data: dict, name: str) -> str:
    if CM_CEILING not in data["arms"]:
        return NO_CEILING
    if name != CM_CEILING and not _ceiling_resolved(data):
        return "no ceiling above GRPO"
    return _share(data["arms"][name]["heldout"])


def _holds(record: dict) -> bool:
    return record.get("p_holm", 1.0) < 0.05


def _gains(record: dict) -> bool:
    """Holds (Holm p < 0.05) with its mean above 0: the declaration's "holds (> 0)"."""
    return _holds(record) and record["mean"] > 0


def _loses(record: dict) -> bool:
    """Holds (Holm p < 0.05) with its mean below 0."""
    return _holds(record) and record["mean"] < 0


def _cm_rows(report: dict) -> list[list[str]]:
    """A report's rows of the page's table: each complete cell's arms and attributions."""
    seeds, rows = _seeds(report), []
    for cell_name, data in report["cells"].items():
        for name, entry in data["arms"].items():
            held, rew = entry["heldout"]["minus_none"], entry["reward"]["minus_none"]
            rows.append([f"`{cell_name}`", f"`{name}`", seeds, ci(held), _holm(held), ci(rew), _holm(rew),
                         _arm_share(data, name)])  # fmt: skip
        for entry in data["attribution"].values():
            held, rew = entry["heldout"], entry["reward"]
            rows.append([f"`{cell_name}`", f"`{entry['arm']}` - `{entry['minus']}`", seeds, ci(held), _holm(held),
                         ci(rew), _holm(rew), ""])  # fmt: skip
    return rows


def _cm_pending_rows(report: dict) -> list[list[str]]:
    """A report's cells still running, by how many of their declared runs are in."""
    return [
        [f"`{cell_name}`", f"under way: {runs_in} of {report['runs_declared'][cell_name]} declared runs in, none read",
         _seeds(report), "", "", "", "", ""]
        for cell_name, runs_in in report["cells_pending"].items()
    ]  # fmt: skip


def credit_methods_table() -> Table:
    """The page's one table: the declared study (seeds 100-115) and item 6's confirmation (seeds 200-215), each arm
    minus GRPO paired by seed, Holm-adjusted p within its declared family, share of the process ceiling."""
    declared, item6 = load("credit_methods"), load("credit_methods.item6")
    return Table(
        ["cell", "arm (or difference)", "seeds", "held-out - GRPO", "Holm p", "final-window reward - GRPO", "Holm p",
         "share of `oracle-process` (held-out)"],
        [*_cm_rows(declared), *_cm_rows(item6), *_cm_pending_rows(declared), *_cm_pending_rows(item6)],
    )  # fmt: skip


def credit_methods_whose() -> Table:
    """Whose gain it is, per complete cell and weight w of the declared study: GRPO + distillation over GRPO, GEAR +
    distillation over GRPO, the one minus the other (held-out, Holm p), and the ceiling beside them."""
    rows = []
    for cell_name, data in load("credit_methods")["cells"].items():
        ceiling = ci(data["arms"][CM_CEILING]["heldout"]["minus_none"]) if CM_CEILING in data["arms"] else "-"
        for w in WEIGHTS:
            grpo = data["arms"][f"grpo-distill-{w}"]["heldout"]["minus_none"]
            gear = data["arms"][f"gear-distill-{w}"]["heldout"]["minus_none"]
            adds = data["attribution"][f"distillation_weight={w}"]["heldout"]
            rows.append([f"`{cell_name}`", w, ci(grpo), _holm(grpo), _arm_share(data, f"grpo-distill-{w}"), ci(gear),
                         _holm(gear), ci(adds), _holm(adds), ceiling])  # fmt: skip
    return Table(
        ["cell", "w", "GRPO + distillation - GRPO", "Holm p", "its share of the ceiling", "GEAR + distillation - GRPO",
         "Holm p", "GEAR + distillation - GRPO + distillation", "Holm p", "`oracle-process` - GRPO"],
        rows,
    )  # fmt: skip


def credit_methods_outcomes() -> Table:
    """What the declared outcomes count, per weight and at either: cells read, cells where GEAR's weights add to the
    same distillation, where GRPO + distillation holds above GRPO and where below (Holm p < 0.05)."""
    declared = load("credit_methods")
    cells, total = declared["cells"], len(declared["runs_declared"])

    def counts(weights: tuple[str, ...]) -> list[str]:
        adds = [c for c, d in cells.items() if any(_gains(d["attribution"][f"distillation_weight={w}"]["heldout"])
                                                   for w in weights)]  # fmt: skip
        grpo = {c: [d["arms"][f"grpo-distill-{w}"]["heldout"]["minus_none"] for w in weights] for c, d in cells.items()}  # fmt: skip
        up = [c for c, recs in grpo.items() if any(map(_gains, recs))]
        down = [c for c, recs in grpo.items() if any(map(_loses, recs))]
        return [f"{len(cells)} of {total}", str(len(adds)), str(len(up)), str(len(down)),
                ", ".join(f"`{c}`" for c in up) or "-", ", ".join(f"`{c}`" for c in down) or "-"]  # fmt: skip

    return Table(
        ["w", "cells read", "GEAR's weights add (cells)", "GRPO + distillation above GRPO (cells)",
         "GRPO + distillation below GRPO (cells)", "above in", "below in"],
        [[w, *counts((w,))] for w in WEIGHTS] + [["either", *counts(WEIGHTS)]],
    )  # fmt: skip


def credit_methods_item6() -> Table:
    """Item 6's confirmation (amendment 2, seeds 200-215): `grpo-agree-0.5` against GRPO, the process ceiling and
    SDPO's log-ratio at the same weight, and on the exploration seeds it was found on."""
    item6, explored = load("credit_methods.item6"), load("credit_methods.exploration")["cells"]
    rows = []
    for cell_name, data in item6["cells"].items():
        agree = data["arms"][CM_SETTING]["heldout"]
        ceiling = data["arms"][CM_CEILING]["heldout"]["minus_none"]
        versus = data["attribution"]["distillation_signal"]["heldout"]
        share = agree["share_of_process_ceiling"]
        found = explored.get(cell_name, {}).get("arms", {}).get(CM_SETTING)
        found_share = found and found["heldout"]["share_of_process_ceiling"]
        rows.append([
            f"`{cell_name}`", ci(agree["minus_none"]), _holm(agree["minus_none"]), ci(ceiling),
            f"{share['mean']:.2f} [{share['ci_low']:.2f}, {share['ci_high']:.2f}]" if share else "no ceiling above GRPO",
            "yes" if data["reaches_80"] else "no", ci(versus), _holm(versus),
            ci(found["heldout"]["minus_none"]) if found else "-", f"{found_share['mean']:.2f}" if found_share else "-",
        ])  # fmt: skip
    return Table(
        ["cell", f"`{CM_SETTING}` - GRPO", "Holm p", "`oracle-process` - GRPO", "share of the ceiling", "reaches 80%",
         f"`{CM_SETTING}` - `{CM_CONTROL}`", "Holm p", "exploration seeds 0-7: - GRPO", "share there"],
        rows,
    )  # fmt: skip


def credit_methods_equivalence() -> Table:
    """Issue 73 item 5: per complete cell and weight, GEAR + distillation minus GRPO + distillation against the margin
    (two one-sided tests, `equivalence` in credit_methods.json), held-out primary, reward beside it."""
    eq = load("credit_methods")["equivalence"]
    rows = []
    for cell_name, weights_of in eq["cells"].items():
        for key, entry in weights_of.items():
            held, rew = entry["heldout"], entry["reward"]
            rows.append([f"`{cell_name}`", key.split("=")[1], f"{held['mean']:+.3f}",
                         f"[{held['ci_low']:+.3f}, {held['ci_high']:+.3f}]", f"+-{held['margin']:.3f}", _holm(held),
                         "yes" if held["equivalent"] else "not shown", f"+-{rew['margin']:.3f}", _holm(rew),
                         "yes" if rew["equivalent"] else "not shown"])  # fmt: skip
    return Table(
        ["cell", "w", "held-out difference", "90% interval", "margin", "TOST Holm p", "equivalent", "reward margin",
         "reward TOST Holm p", "reward equivalent"],
        rows,
    )  # fmt: skip


CM_DYNAMICS_ARM = "grpo-distill-0.5"
"""The arm whose training series the page's Open section describes: SDPO's log-ratio at the larger weight."""


def credit_methods_dynamics() -> Table:
    """How `CM_DYNAMICS_ARM` trains in each complete cell, from `dynamics` in credit_methods.json (seed means,
    descriptive: no declared comparison), beside GRPO."""
    dynamics = load("credit_methods")["dynamics"]
    opening, window = dynamics["opening"], dynamics["window"]
    rows = []
    for cell_name, arms in dynamics["cells"].items():
        mine, grpo = arms[CM_DYNAMICS_ARM], arms["none"]
        share, reward = mine["distill_share"], mine["reward"]
        rows.append([f"`{cell_name}`", str(mine["n_seeds"]), f"{mine['heldout']:.2f}", f"{grpo['heldout']:.2f}",
                     f"{share['first']:.2f} -> {share['last']:.2f}", f"{reward['first']:.2f} -> {reward['last']:.2f}",
                     f"{grpo['reward']['first']:.2f} -> {grpo['reward']['last']:.2f}"])  # fmt: skip
    return Table(
        ["cell", "seeds", f"`{CM_DYNAMICS_ARM}` held-out", "GRPO held-out",
         f"distillation share, first {opening} -> last {window} logged steps", "training reward, the same",
         "GRPO's training reward, the same"],
        rows,
    )  # fmt: skip


def credit_methods_sdpo_teacher() -> Table:
    """Each cell's warm start decoded greedily under the student's, GEAR's and SDPO's prompts (bench/sdpo_teacher.py)."""
    rows = []
    order = ("student", "gear-solution", "sdpo-demonstration", "sdpo-feedback")
    for key in ("sdpo_teacher", "sdpo_teacher_k4", "sdpo_teacher_chained"):
        report = load(f"credit_methods.{key}")
        for label, field in (("problems right", "accuracy"), ("decisions right", "decision_accuracy")):
            rows.append([f"`{report['cell']}`", label, *(f"{report['kinds'][k][field]:.3f}" for k in order)])
    return Table(
        ["cell's warm start", "scored", "plain prompt", "the reference solution in GEAR's teacher prompt",
         "as SDPO's successful demonstration", "as SDPO's environment feedback"],
        rows,
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# Bounded self-distillation (issue 73's declared confirmation, bench/distill_bounds.py): a cell is shown only once all
# its declared runs are in, the others by their run counts; the verdict only once both cells are read.
# ---------------------------------------------------------------------------------------------------------------------

DB_COMPARISONS = {
    "chosen_not_below_none": "`{chosen}` - `none` > -{margin}",  # test 1: non-inferiority to GRPO
    "chosen_not_below_blend": "`{chosen}` - `grpo-distill-0.5` > -{margin}",  # test 3 without a blend gain
    "sdpo_fair_minus_blend": "`sdpo-trl-fair-0.5` - `grpo-distill-0.5`",  # the fair SDPO arm against our blend
}
"""The declared comparisons beyond each arm minus GRPO (`comparisons` in distill_bounds.json), as the table names
them."""


def _metric(entry: dict, name: str) -> dict | None:
    return (entry.get(name) or {}).get("minus_none")


def _ci_or_dash(record: dict | None) -> str:
    """`ci(record)`, or "-" where it has no interval: no record, no mean, or fewer than 2 seeds."""
    missing = not record or record.get("mean") is None or record.get("n_seeds", 2) < 2
    return "-" if missing else ci(record)


def _collapsed(collapse: dict) -> str:
    return f"{len(collapse['collapsed_seeds'])} of {collapse['n_seeds']}"


def distill_bounds_table() -> Table:
    """The page's one table: per complete cell each arm minus GRPO (held-out primary, greedy secondary; Holm p within
    the declared family per metric), its collapsed seeds and final-window distillation share, then the declared
    comparisons; a cell still running as its count of runs in."""
    report = load("distill_bounds")
    seeds = _seeds(report)
    rows = []
    for cell_name, data in report["cells"].items():
        for name, entry in data["arms"].items():
            if name == "none":
                continue
            held, greedy, collapse = _metric(entry, "heldout"), _metric(entry, "greedy"), entry["collapse"]
            share = "-" if collapse["distill_share"] is None else f"{collapse['distill_share']:.2f}"
            rows.append([f"`{cell_name}`", f"`{name}` - `none`", seeds, _ci_or_dash(held), _holm(held or {}),
                         _ci_or_dash(greedy), _holm(greedy or {}), _collapsed(collapse), share])  # fmt: skip
        for key, label in DB_COMPARISONS.items():
            held = report["comparisons"]["heldout"].get(cell_name, {}).get(key)
            if held is None:
                continue
            greedy = report["comparisons"]["greedy"].get(cell_name, {}).get(key)
            rows.append([f"`{cell_name}`", label.format(chosen=report["chosen"], margin=report["margin"]), seeds,
                         _ci_or_dash(held), _holm(held), _ci_or_dash(greedy), _holm(greedy or {}), "", ""])  # fmt: skip
    for cell_name, counts in report["cells_pending"].items():
        status = f"under way: {counts['runs_in']} of {counts['runs_declared']} declared runs in, none read"
        rows.append([f"`{cell_name}`", status, seeds, "", "", "", "", "", ""])
    return Table(
        ["cell", "arm minus GRPO (or comparison)", "seeds", "held-out - GRPO", "Holm p", "greedy - GRPO", "Holm p",
         "collapsed seeds", "final distill share"],
        rows,
    )  # fmt: skip


DB_VERDICT = (
    ("1", "1_not_below_grpo_on_calculator"),
    ("2", "2_blend_collapses_on_calculator"),
    ("3", "3_keeps_the_independent_k8_gain"),
    ("passes", "passes"),
    ("variant_holds", "variant_holds"),
)
"""The declaration's verdict keys (declaration.json `verdict`) and the report's reading of each."""


def distill_bounds_verdict() -> Table:
    """Each declared test of the verdict in the declaration's own words, beside what the report reads on held-out
    accuracy ("pending" until both cells are read)."""
    report, declared = load("distill_bounds"), load("distill_bounds.declaration")
    verdict = report.get("verdict")
    rows = []
    for key, reading in DB_VERDICT:
        said = "pending" if verdict is None else ("yes" if verdict[reading] else "no")
        rows.append([key, declared["verdict"][key], said])
    if verdict is not None:
        said = "yes" if verdict["blend_gain_holds_on_independent_k8"] else "no: test 3 reads the variant against it"
        rows.insert(2, ["(3's condition)", "independent-k8: grpo-distill-0.5 - none holds above 0", said])
    return Table(["test", "declared (held-out, Holm p < 0.05)", "holds"], rows)


# ---------------------------------------------------------------------------------------------------------------------
# A pretrained instruct model (issue 72's declared study, bench/pretrained_credit.py)
# ---------------------------------------------------------------------------------------------------------------------

def _pc_equivalence(entry: dict) -> str:
    test = entry.get("equivalence")
    if not test:
        return ""
    return f"{'yes' if test['equivalent'] else 'not shown'} ({_holm(test) or '-'})"


def pretrained_credit_table() -> Table:
    """The page's one table: per complete cell each arm minus GRPO, paired by seed (held-out primary with its Holm p
    and its equivalence test at the declared margin, greedy beside it), and its share of `oracle-process` where the
    ceiling lies above GRPO; a cell still running as its count of runs in."""
    report, declared = load("pretrained_credit"), load("pretrained_credit.declaration")
    seeds, margin = _seeds(report), declared["equivalence_margin"]["heldout"]
    per_cell = len(declared["arms"]) * len(declared["seeds"])
    rows = []
    for cell_name, data in report["cells"].items():
        if cell_name in report["cells_pending"]:
            continue
        for name, entry in data["arms"].items():
            held, greedy = entry["heldout"]["minus_none"], entry["greedy"]["minus_none"]
            rows.append([f"`{cell_name}`", f"`{name}`", seeds, _ci_or_dash(held), _holm(held),
                         _pc_equivalence(entry["heldout"]), _ci_or_dash(greedy), _holm(greedy),
                         _arm_share(data, name)])  # fmt: skip
    for cell_name, runs_in in report["cells_pending"].items():
        rows.append([f"`{cell_name}`", f"under way: {runs_in} of {per_cell} declared runs in, none read", seeds,
                     "", "", "", "", "", ""])  # fmt: skip
    return Table(
        ["cell", "arm", "seeds", "held-out - GRPO", "Holm p", f"within +-{margin} (TOST Holm p)", "greedy - GRPO",
         "Holm p", f"share of `{CM_CEILING}` (held-out)"],
        rows,
    )  # fmt: skip


def pretrained_credit_teacher() -> Table:
    """Item 2's checks per declared cell, from the committed probe (bench/results/pretrained/): whether the teacher
    gains from the reference (its log-probability gap on the student's own rollouts, right minus wrong within mixed
    groups, and the mean) and where GEAR's first onset lands against chance."""
    report = load("pretrained_credit")
    rows = []
    for cell_name, data in report["cells"].items():
        where = data.get("localization") or {}
        rows.append([f"`{cell_name}`", _ci_or_dash(data.get("teacher_gap_right_minus_wrong")),
                     _ci_or_dash(data.get("teacher_gap")), _ci_or_dash(data.get("teacher_minus_student_accuracy")),
                     "-" if where.get("rate") is None else
                     f"{where['rate']:.3f} [{where['ci_low']:.3f}, {where['ci_high']:.3f}]",
                     "-" if where.get("chance") is None else f"{where['chance']:.3f}",
                     _ci_or_dash(data.get("localization_minus_chance"))])  # fmt: skip
    return Table(
        ["cell", "teacher gap, right - wrong rollouts (nats)", "teacher gap, all rollouts (nats)",
         "teacher - student accuracy", "first onset on the first wrong line", "chance", "minus chance"],
        rows,
    )  # fmt: skip


TABLES = {
    "horizon.table": horizon_table,
    "horizon.cells": horizon_cells,
    "horizon.replications": horizon_replications,
    "horizon.drop_prefix": horizon_drop_prefix,
    "horizon.cost": horizon_cost,
    "horizon.k16": horizon_k16,
    "headroom.table": headroom_table,
    "headroom.start": headroom_start,
    "teacher_sweep.table": teacher_sweep_table,
    "teacher_sweep.weights": teacher_sweep_weights,
    "learning.table": learning_table,
    "learning.sites": learning_sites,
    "learning.lrprobe": learning_lrprobe,
    "performance.table": performance_table,
    "performance.provenance": performance_provenance,
    "performance.h200": performance_h200,
    "performance.recipes": performance_recipes,
    "performance.host": performance_host,
    "performance.syncs": performance_syncs,
    "performance.teacher_pass": performance_teacher_pass,
    "performance.h100": performance_h100,
    "performance.chunks": performance_chunks,
    "credit_methods.table": credit_methods_table,
    "credit_methods.whose": credit_methods_whose,
    "credit_methods.outcomes": credit_methods_outcomes,
    "credit_methods.item6": credit_methods_item6,
    "credit_methods.equivalence": credit_methods_equivalence,
    "credit_methods.dynamics": credit_methods_dynamics,
    "credit_methods.sdpo_teacher": credit_methods_sdpo_teacher,
    "distill_bounds.table": distill_bounds_table,
    "distill_bounds.verdict": distill_bounds_verdict,
    "pretrained_credit.table": pretrained_credit_table,
    "pretrained_credit.teacher": pretrained_credit_teacher,
}


# ---------------------------------------------------------------------------------------------------------------------
# Rewriting and checking the files
# ---------------------------------------------------------------------------------------------------------------------


@cache
def _built(generator) -> Table:
    return generator()


def render(text: str) -> str:
    """`text` with every block regenerated: a table on its own lines, a cell inline."""

    def table(name: str) -> Table:
        if name not in TABLES:
            raise KeyError(f"no generator for table {name!r}: add it to TABLES in docs/results_blocks.py")
        return _built(TABLES[name])  # once per run: the JSON it reads is cached too

    def fill(match: re.Match) -> str:
        name, row, column, _ = match.groups()
        if row is None:
            return f"<!-- gen:{name} -->\n{table(name).markdown()}\n<!-- /gen -->"
        return f"<!-- gen:{name}[{row}][{column}] -->{table(name).cell(row, column)}<!-- /gen -->"

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
