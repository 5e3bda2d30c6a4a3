"""Does the teacher localize errors as well after training? Less: bench/results/horizon/trained_probes.json.

The horizon study's localization probe, run on trained models (`chained`, K = 4): the teacher's first onset is at or
before the error in 0.91 of failed rollouts at the warm start and 0.73-0.80 on the models seed 0 trained (`none`,
`gear-solution`, `gear-drop-prefix`); CHANGELOG, `gear-drop-prefix`.

bench/horizon.py probes each arm's credit once, on the warm start. An arm whose weights depend on where the teacher's
first onset falls (`gear-drop-prefix`, `failed_prefix_weight: 0`) acts on the live policy's onsets at every step,
so this probes the models a study's runs saved: for each named arm, the model its run of `--seed` trained, with the
solution teacher (the live policy shown the K lines) and `failed_prefix_weight: 0`, on the same 48 held-out problems
x 8 samples as the study's probes. The warm start is probed the same way, as the reference row.

    python -m bench.probes.horizon_trained_probe --variant chained --k 4 --arms none gear-solution gear-drop-prefix

Reads the study's cache (`--work-dir`, as bench/horizon.py's) and writes `bench/results/horizon/trained_probes.json`:
model -> bench/teacher_sweep.py's `localization` (onset at the error, `first_onset_by_error`, blame ratio, ...).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from bench import headroom, horizon, learning
from bench.harness import REPO_ROOT, jobs, results_dir


def probe_job(variant: str, k: int, model: str, key: str, work_dir: Path, problems: int) -> dict:
    """bench/headroom.py's probe job for `model`, with `gear-drop-prefix`'s settings at (variant, K)."""
    import yaml

    recipe = yaml.safe_load((REPO_ROOT / horizon.RECIPE).read_text())
    return {
        "kind": "probe",
        "key": key,
        "mode": "gear",
        "oracle": None,
        "oracle_options": None,
        "overrides": horizon.cell_overrides(variant, k, model, "gear-drop-prefix"),
        "problems": problems,
        "recipe": horizon.RECIPE,
        "recipe_sha": learning.recipe_values_sha(recipe),  # as horizon's: its cached probes stay valid
        "error_site": "horizon",
        "work_dir": str(work_dir),
        "eval": {"split": "test"},
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="chained", choices=sorted(horizon.VARIANTS))
    parser.add_argument("--k", type=int, default=horizon.MAIN_K)
    parser.add_argument("--arms", nargs="+", default=["none", "gear-drop-prefix"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--problems", type=int, default=48)
    parser.add_argument("--work-dir", default=str(REPO_ROOT / "outputs" / "horizon_study"))
    parser.add_argument("--out", default=str(results_dir("horizon") / "trained_probes.json"))
    args = parser.parse_args(argv)
    warm = horizon.VARIANTS[args.variant]["model"]
    cell_dir = Path(args.work_dir) / f"{args.variant}-k{args.k}-{jobs.sha_of(warm)}"
    models = {"warm start": warm}
    for arm in args.arms:
        model = cell_dir / learning.run_key(arm, args.seed) / "model"
        if not model.is_dir():
            parser.error(f"no trained model for arm {arm!r}, seed {args.seed}: {model} (run bench/horizon.py first)")
        models[f"{arm}, seed {args.seed}, trained"] = str(model)
    out_dir = cell_dir / "trained_probes"
    results = {}
    for index, (name, model) in enumerate(models.items()):
        job = probe_job(args.variant, args.k, model, f"probe_{index}", out_dir, args.problems)
        results[name] = headroom.dispatch(job)["localization"]
        print(name, json.dumps({key: round(v, 3) if isinstance(v, float) else v for key, v in results[name].items()}))
    report = {"variant": args.variant, "k": args.k, "seed": args.seed, "problems": args.problems, "models": results}
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
