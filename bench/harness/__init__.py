"""What every study stands on, so that a study script keeps only its arms, budgets, probes and tables.

- :mod:`bench.harness.jobs`: the worker-process job runner, the cache keyed on a job's inputs, resume.
- :mod:`bench.harness.runs`: train one run and score one model (the cached jobs `train` and `start`).
- :mod:`bench.harness.stats`: paired t-intervals, the paired bootstrap of a ratio, Holm's correction.
- :mod:`bench.harness.reports`: provenance (commit, machine, cost) and the JSON, Markdown and PNG writers.
- :mod:`bench.harness.oracles`: label oracles as registered credit modes (`gear_trl.credit.modes`).
- :mod:`bench.harness.index`: the results index, ``bench/results/README.md``.
- :mod:`bench.harness.sdpo`: TRL's SDPOTrainer driven by a gear_trl recipe.

Nothing under bench/ edits the import path: run studies as ``python -m bench.<study>`` from the repository root.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO_ROOT / "bench"
RESULTS_DIR = BENCH_DIR / "results"


def results_dir(study: str) -> Path:
    """Where study `study` writes its results: ``bench/results/<study>/``."""
    return RESULTS_DIR / study
