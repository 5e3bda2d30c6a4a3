"""Do the credit-methods answers change with a model that can read the reference? Issue 72's study: GRPO, GEAR at
the paper's values, GRPO + self-distillation, GRPO + agreement, RLSD, TRL's SDPOTrainer (as it ships and at weight
0.5) and the process ceiling, on SmolLM2-135M-Instruct (`make smollm2`) learning the `numbered` item-list cells
(gear_trl/rewards/item_lists.py) with LoRA on CPU, paired by seed, over the credit-methods study's harness.

    python -m bench.pretrained_credit --cell numbered-k4 --arms none --seeds 0 1   # pilot / exploration (seeds 0-47)
    python -m bench.pretrained_credit --cell numbered-k4                           # the declared runs (declaration first)
    python -m bench.pretrained_credit --report-only                                # the report from the kept runs

Status: declared (bench/results/pretrained_credit/declaration.md, 2026-12-06): seeds 400-415, 8 steps, the first 100
held-out problems; pilots and exploration arms stay on seeds 0-47.

Declared seeds run only once `declaration.json` is committed in the results folder (bench/results/pretrained_credit/);
they run blind (no score printed before the report). Every finished run is kept at once under
`runs/<cell>/<arm>__seed<N>.json` there, the study's cache across sessions. The report (`pretrained_credit.json`)
holds `model` (package, version, the GGUF's sha256), per cell the teacher checks of item 2 (read from the probe's
JSON), and per arm and metric the paired difference from GRPO with its Holm-adjusted p and, where declared, the
equivalence test at the declared margin.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from bench import credit_methods as cm
from bench.harness import REPO_ROOT, index, jobs, reports, results_dir, runs, stats

RESULTS = results_dir("pretrained_credit")
RUNS_DIR = RESULTS / "runs"
DECLARATION_PATH = RESULTS / "declaration.json"
RECIPE = "recipes/pretrained/config_item_lists.yaml"
MODEL = "data/smollm2-135m-instruct"
PROBES = tuple(results_dir("pretrained") / name for name in ("explore_items_numbered.json",
                                                              "explore_items_numbered_k4.json"))  # fmt: skip
"""The item-2 probe's figures (bench/results/pretrained/explore_items.py), the recipe's settings on fresh prompts:
each cell's teacher gap and localization (K = 6 and 8 in one run, K = 4 in a later one)."""
EXPLORATION = range(48)
WINDOW = 5
"""The final window of training reward, in logged steps (a short run: a quarter of 20 steps)."""
EVAL_LIMIT = 100
"""Held-out problems a run is scored on (the first 100 of the 200-problem test split, the same for every run): with 2
samples each, evaluation was about half of an 8-step run's time at 200, and the seed-to-seed spread of a paired
difference, not the problems' count, sets the study's intervals (PLAN.md, the budget)."""
METRICS = {"heldout": "held-out sampled accuracy at the end", "greedy": "held-out greedy accuracy at the end",
           "pass_at_2": "held-out pass@2 at the end (the 2 samples)",
           "reward": f"training reward, last {WINDOW} steps"}  # fmt: skip


def _cell(k: int) -> dict:
    data = f"data/item_lists/numbered/k{k}"
    return {
        "recipe": RECIPE,
        "base": ["--model_name_or_path", MODEL, "--dataset_name", data],
        "reference": [],  # the recipe's teacher template and `teacher_reference: solution` show the K reference lines
        "eval": {
            "dataset": data,
            "split": "test",
            "dataset_format": "generic",
            "max_new_tokens": int(cm._recipe(RECIPE)["max_completion_length"]),
            "prompt_template": cm._recipe(RECIPE)["prompt_template"],  # as the runs were trained
            "reward": "numbered_list_accuracy",
        },
        "error_site": "item_lists",
    }


CELLS = {"numbered-k4": _cell(4), "numbered-k8": _cell(8)}
"""Cell -> its data and held-out split: one task family at two horizons, the two whose start is in the 0.2-0.6 band on
fresh prompts (K = 4: 0.32, K = 8: 0.23; K = 6 starts at 0.16; bench/results/pretrained/EXPLORE.md)."""
ARMS = {
    "none": {"credit": "none"},
    "gear": {"credit": "gear", "reference": True},
    "grpo-distill-0.25": {"credit": "none", "reference": True, "set": ["--distillation_weight", "0.25"]},
    "grpo-agree-0.5": {"credit": "none", "reference": True,
                       "set": ["--distillation_weight", "0.5", "--distillation_signal", "agreement"]},
    "rlsd-reference": {"credit": "rlsd", "reference": True, "schedule": True,
                       "set": ["--teacher", "periodic", "--rlsd_lambda", "0.5"]},
    # TRL's SDPOTrainer with the reference in its own reprompt wording (this model reads instructions), as it ships
    # (distillation_weight 1.0: no reward gradient) and with half the reward gradient kept
    "sdpo-trl": {"credit": "none", "sdpo": {"privileged_context": "solution"}},
    "sdpo-trl-0.5": {"credit": "none", "sdpo": {"privileged_context": "solution", "distillation_weight": 0.5}},
    "oracle-process": {"credit": "gear", "oracle": "process"},
}  # fmt: skip
"""Arm -> credit mode, whether the teacher sees the reference, its own settings (issue 72 item 3). `rlsd-reference`'s
schedule follows the run's length (`schedule`: the teacher synced at half the steps, the blend decayed over all of
them), as RLSD's reference script ties both to its run."""
CEILING = "oracle-process"
EXPLORE_ARMS = {
    "oracle-first-error": {"credit": "gear", "oracle": "first_error"},
    "oracle-prefix-keep-close": {"credit": "gear", "oracle": "prefix", "oracle_options": {"keep_close": True}},
}  # fmt: skip
"""Exploration-only arms (seeds 0-47, never in a declared family): the sign-preserving label weightings of the
horizon study (bench/harness/oracles.py), tried as ceilings when `oracle-process` fell below GRPO in the pilots."""
ALL_ARMS = {**ARMS, **EXPLORE_ARMS}


def declaration() -> dict | None:
    return json.loads(DECLARATION_PATH.read_text()) if DECLARATION_PATH.exists() else None


def declaration_drift(declared: dict) -> list[str]:
    """What in this script differs from the committed declaration (arms' settings, cells, held-out size, recipe,
    temperature): a declared seed runs only when this is empty, so code changed after the declaration cannot
    quietly change the study."""
    problems = []
    if declared.get("arms") != ARMS:
        problems.append("ARMS differ from the declared arms")
    if sorted(declared.get("cells") or {}) != sorted(CELLS):
        problems.append(f"CELLS {sorted(CELLS)} differ from the declared {sorted(declared.get('cells') or {})}")
    evaluation = declared.get("eval") or {}
    if evaluation.get("problems") != EVAL_LIMIT:
        problems.append(f"EVAL_LIMIT {EVAL_LIMIT} differs from the declared {evaluation.get('problems')}")
    if declared.get("recipe") != RECIPE:
        problems.append(f"the recipe {RECIPE} differs from the declared {declared.get('recipe')}")
    temperature = float(cm._recipe(RECIPE).get("temperature", 1.0))
    if evaluation.get("temperature") != temperature:
        problems.append(f"the recipe's temperature {temperature} differs from the declared {evaluation.get('temperature')}")
    return problems


def max_steps(seed: int, declared: dict | None = None) -> int:
    """A run's step budget: the declaration's for its seeds, the recipe's otherwise (pilots)."""
    declared = declared if declared is not None else declaration()
    if declared and seed in declared["seeds"]:
        return int(declared["max_steps"])
    return int(cm._recipe(RECIPE)["max_steps"])


def job_for(
    cell: str, arm: str, seed: int, work_root: Path, declared: dict | None = None, steps: int | None = None
) -> dict:
    """The `train` job of (cell, arm, seed), kept in this study's folder; `steps` overrides the budget of a pilot
    (an exploration seed only: a declared seed trains the declared budget)."""
    spec, c = ALL_ARMS[arm], CELLS[cell]
    if arm in EXPLORE_ARMS and declared and seed in declared["seeds"]:
        raise ValueError(f"{arm} is an exploration arm: it runs on exploration seeds (0-47) only")
    if steps is not None and declared and seed in declared["seeds"]:
        raise ValueError(f"seed {seed} is declared: it trains the declared {declared['max_steps']} steps")
    steps = steps if steps is not None else max_steps(seed, declared)
    extra = list(spec.get("set", []))
    if spec.get("schedule"):
        extra += ["--teacher_sync_steps", str(max(1, steps // 2)), "--rlsd_lambda_decay_steps", str(steps)]
    recipe = cm._recipe(c["recipe"])
    return {
        "kind": "train", "key": runs.run_key(arm, seed), "label": arm, "cell": cell, "mode": spec["credit"],
        "oracle": spec.get("oracle"), "oracle_options": spec.get("oracle_options"), "error_site": c["error_site"],
        "sdpo": spec.get("sdpo"), "seed": seed, "max_steps": steps,
        "overrides": [*c["base"], *(c["reference"] if spec.get("reference") else []), *extra],
        "recipe": c["recipe"], "recipe_sha": runs.recipe_values_sha(recipe), "eval": c["eval"],
        "eval_limit": EVAL_LIMIT, "train_eval": None, "temperature": float(recipe.get("temperature", 1.0)),
        "work_dir": str(work_root / cell), "runs_dir": str(RUNS_DIR),
    }  # fmt: skip


def cached(job: dict) -> dict | None:
    path = cm.kept_path(job)
    if path.exists():
        result = json.loads(path.read_text())
        if result.get("spec") == cm.spec_of(job):
            return result
    return None


# ---------------------------------------------------------------------------------------------------------------------
# The report (pure)
# ---------------------------------------------------------------------------------------------------------------------


def metric(run: dict, name: str) -> float:
    """A run's `heldout` (sampled accuracy), `greedy` (greedy accuracy), `pass_at_2` (a problem solved by either
    sample) or `reward` (mean of its last `WINDOW` logged rewards); NaN where it has none."""
    fields = {"heldout": "sampled_accuracy", "greedy": "greedy_accuracy", "pass_at_2": "pass_at_k"}
    if name in fields:
        value = (run.get("eval") or {}).get(fields[name])
        return math.nan if value is None else value
    rewards = [r for r in (run.get("reward") or [])[-WINDOW:] if r is not None]
    return sum(rewards) / len(rewards) if rewards else math.nan


def paired(runs_: list[dict], arm: str, baseline: str, name: str, seeds) -> dict[int, float]:
    mine = {r["seed"]: r for r in runs_ if r["label"] == arm and r["seed"] in seeds}
    base = {r["seed"]: r for r in runs_ if r["label"] == baseline and r["seed"] in seeds}
    diffs = {s: metric(mine[s], name) - metric(base[s], name) for s in sorted(set(mine) & set(base))}
    return {s: d for s, d in diffs.items() if not math.isnan(d)}


def summarize(runs_by_cell: dict[str, list[dict]], seeds, margin: dict | None = None) -> dict:
    """Per cell, arm and metric: `minus_none` {mean, ci_low, ci_high, n_seeds, p, p_holm} (Holm over every arm but
    the ceiling in every cell, per metric: the declared family), `share_of_process_ceiling` (where the ceiling's gain
    holds above 0), and with `margin` ({metric: m}) `equivalence`: two one-sided tests of the difference inside
    +-m (`stats.tost`), Holm over the same family."""
    seeds = set(seeds)
    cells: dict = {}
    family: dict[str, list[dict]] = {name: [] for name in METRICS}
    equivalent: dict[str, list[dict]] = {name: [] for name in METRICS}
    for cell, cell_runs in runs_by_cell.items():
        ran = {r["label"] for r in cell_runs if r["seed"] in seeds}
        out = cells.setdefault(cell, {"arms": {}})
        for arm in ALL_ARMS:  # exploration arms run on exploration seeds only, outside every family
            if arm == "none" or arm not in ran:
                continue
            entry = out["arms"].setdefault(arm, {})
            for name in METRICS:
                diffs = paired(cell_runs, arm, "none", name, seeds)
                interval = stats.paired_interval(list(diffs.values()))
                record = {k: interval[k] for k in ("mean", "ci_low", "ci_high", "n_seeds")}
                record["p"] = stats.t_p_value(list(diffs.values()))
                entry[name] = {"minus_none": record, "share_of_process_ceiling": None}
                if arm == CEILING or arm in EXPLORE_ARMS:
                    continue
                family[name].append(record)
                ceiling = paired(cell_runs, CEILING, "none", name, seeds)
                ceiling_interval = stats.paired_interval(list(ceiling.values()))
                if ceiling_interval["n_seeds"] >= 2 and ceiling_interval["ci_low"] > 0:
                    entry[name]["share_of_process_ceiling"] = stats.bootstrap_ratio(diffs, ceiling)
                if margin and name in margin:
                    test = stats.tost(list(diffs.values()), margin[name])
                    entry[name]["equivalence"] = test
                    equivalent[name].append(test)
    for name in METRICS:
        for record, p_holm in zip(family[name], stats.holm([r["p"] for r in family[name]]), strict=True):
            record["p_holm"] = p_holm
        for test, p_holm in zip(equivalent[name], stats.holm([t["p"] for t in equivalent[name]]), strict=True):
            test["p_holm"] = p_holm
            test["equivalent"] = p_holm < 0.05
    return cells


def teacher_checks(probe: dict | None) -> dict:
    """Item 2's checks per cell from the probe's JSON (bench/results/pretrained/explore_items.py): {cell:
    {"teacher_gap": {mean, ci_low, ci_high} (nats, on the student's own rollouts), "teacher_gap_right_minus_wrong"
    {mean, ci_low, ci_high} (within mixed groups: the right rollouts' gap minus the wrong ones'; the reading a mean
    over mostly wrong rollouts hides), "teacher_minus_student_accuracy" {mean, ci_low, ci_high}, "localization": {rate,
    chance, ci_low, ci_high} (GEAR's first onset on the first wrong line; the interval is the rate's),
    "localization_minus_chance" {mean, ci_low, ci_high}}}; {} without a probe."""
    out: dict = {}
    for cell in (probe or {}).get("cells") or []:
        gap = cell.get("teacher_gap_nats") or {}
        where = cell.get("localization") or {}
        rate = where.get("first_onset_on_wrong_line") or {}
        above = where.get("first_onset_minus_chance") or {}
        out[f"{cell['variant']}-k{cell['k']}"] = {
            "teacher_gap": {k: gap.get(k) for k in ("mean", "ci_low", "ci_high")},
            "teacher_gap_right_minus_wrong": {
                k: (cell.get("teacher_gap_right_minus_wrong") or {}).get(k) for k in ("mean", "ci_low", "ci_high")
            },
            "teacher_minus_student_accuracy": {
                k: (cell.get("teacher_minus_student_accuracy") or {}).get(k) for k in ("mean", "ci_low", "ci_high")
            },
            "localization": {
                "rate": rate.get("mean"),
                "chance": (where.get("first_onset_chance") or {}).get("mean"),
                "ci_low": rate.get("ci_low"),
                "ci_high": rate.get("ci_high"),
            },
            "localization_minus_chance": {k: above.get(k) for k in ("mean", "ci_low", "ci_high")},
        }
    return out


def collect() -> dict[str, list[dict]]:
    return cm.kept_runs(RUNS_DIR)


def model_block() -> dict:
    from gear_trl.models import smollm2

    source = REPO_ROOT / MODEL / smollm2.PROVENANCE_FILE
    record = json.loads(source.read_text()) if source.exists() else {}
    return {"package": smollm2.PACKAGE, "version": smollm2.VERSION, "gguf_sha256": smollm2.GGUF_SHA256,
            "converted": record or None}  # fmt: skip


def report(declared: dict | None) -> dict:
    runs_by_cell = collect()
    seeds = declared["seeds"] if declared else list(EXPLORATION)
    complete = {}
    pending = {}
    for cell, cell_runs in runs_by_cell.items():
        have = {(r["label"], r["seed"]) for r in cell_runs}
        n = sum((arm, s) in have for arm in ARMS for s in seeds)
        if declared and n < len(ARMS) * len(seeds):
            pending[cell] = n  # nothing of a declared cell is read before all its runs are in
        else:
            complete[cell] = cell_runs
    margin = declared.get("equivalence_margin") if declared else None
    checks = {}
    for path in PROBES:
        checks.update(teacher_checks(json.loads(path.read_text()) if path.exists() else None))
    return {
        "title": "Credit methods on a pretrained instruct model: each arm minus GRPO, paired by seed"
        + ("" if declared else " (exploration)"),
        "declaration": DECLARATION_PATH.relative_to(REPO_ROOT).as_posix() if declared else None,
        "model": model_block(),
        "seeds": sorted(seeds),
        "window": WINDOW,
        "cells_pending": pending,
        "runs": {cell: len(r) for cell, r in complete.items()},
        "cells": with_teacher_checks(summarize(complete, seeds, margin), checks),
    }


def with_teacher_checks(cells: dict, checks: dict) -> dict:
    """Each study cell's item-2 checks beside its arms (`cells` -> cell -> `teacher_gap`, `localization`, ...,
    `arms`), a cell whose runs are pending keeping its checks; probe cells the study does not run are left out."""
    out = {cell: dict(entry) for cell, entry in cells.items()}
    for cell in CELLS:
        if cell in checks:
            out.setdefault(cell, {"arms": {}}).update(checks[cell])
    return out


PLOT = "pretrained_credit"
"""The results page's one plot, `pretrained_credit.png` in this folder: the declared report's complete cells."""


def plot(report: dict, path: Path) -> list[str]:
    """One panel per complete cell: each arm's held-out accuracy minus GRPO's, paired by seed, with its 95%
    t-interval (the ceiling, `oracle-process`, as a black square). Returns the cells drawn (none: no file written)."""
    cells = [c for c, entry in report["cells"].items() if entry.get("arms")]
    panels = [{"title": f"{cell} (seeds {report['seeds'][0]}-{report['seeds'][-1]})",
               "rows": [{"label": arm, "record": entry["heldout"]["minus_none"],
                         "color": "black" if arm == CEILING else "tab:blue", "marker": "s" if arm == CEILING else "o"}
                        for arm, entry in report["cells"][cell]["arms"].items()]}
              for cell in cells]  # fmt: skip
    if panels:
        reports.interval_panels(panels, "SmolLM2-135M-Instruct: each arm minus GRPO", path)
    return cells


def main(argv: list[str] | None = None, log=print) -> dict:
    parser = jobs.study_parser(__doc__, sorted(CELLS), list(ALL_ARMS), study="pretrained_credit", arms_default="all",
                               seeds_default="the declared ones")  # fmt: skip
    parser.add_argument("--max-steps", type=int, help="A pilot's step budget (exploration seeds only; default: the "
                        "recipe's)")  # fmt: skip
    args = parser.parse_args(argv)
    declared = declaration()
    seeds = args.seeds or (declared["seeds"] if declared else None)
    if not seeds:
        parser.error("no declaration is committed yet: name pilot seeds (0-47) with --seeds")
    stray = [s for s in seeds if s not in EXPLORATION and not (declared and s in declared["seeds"])]
    if stray:
        parser.error(f"seeds {stray} are neither exploration seeds (0-47) nor declared ones")
    if args.max_steps is not None and (args.max_steps < 1 or any(s not in EXPLORATION for s in seeds)):
        parser.error("--max-steps is a pilot's budget: a positive number, on exploration seeds (0-47) only")
    if declared and any(s in declared["seeds"] for s in seeds) and declaration_drift(declared):
        parser.error("the code no longer matches declaration.json: " + "; ".join(declaration_drift(declared)))
    wall = time.perf_counter()
    if not args.report_only:
        if not args.cell:
            parser.error("name the cells to run with --cell")
        if not (REPO_ROOT / MODEL / "config.json").exists():
            parser.error(f"{MODEL} is missing: run `make smollm2` first")
        work_root = Path(args.work_dir or REPO_ROOT / "outputs" / "pretrained_credit")
        planned = [job_for(cell, arm, seed, work_root, declared, args.max_steps) for cell in args.cell
                   for seed in seeds for arm in (args.arms or ARMS)]  # fmt: skip
        blind = bool(declared) and any(s in declared["seeds"] for s in seeds)
        jobs.run_jobs(planned, args.workers, False, log, dispatch=cm.dispatch, cached=cached, blind=blind)
    result = {**report(declared), **reports.provenance(wall)}
    name = "pretrained_credit" if declared else "pretrained_credit_exploration"
    (RESULTS / f"{name}.json").write_text(reports.dumps(result))
    log(f"wrote {RESULTS / name}.json ({result['runs']}; pending: {result['cells_pending'] or 'none'})")
    if declared:
        drawn = plot(result, RESULTS / f"{PLOT}.png")
        files = {"pretrained_credit.json": (
            "the declared report: per cell the teacher checks, and once all its declared runs are in, per arm and "
            "metric minus GRPO (mean, 95% interval, p, Holm p, seeds), the share of the process ceiling and the "
            "equivalence tests; the cells still running, with their run counts")}  # fmt: skip
        if drawn:
            files[f"{PLOT}.png"] = "the results page's plot: the declared report's complete cells"
        index.list_files(RESULTS, files)
        log(f"listed {name}.json in the manifest" + (f"; wrote {PLOT}.png ({', '.join(drawn)})" if drawn else ""))
    return result


if __name__ == "__main__":
    main()
