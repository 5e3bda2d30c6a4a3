"""The studies of gear_trl (bench/README-like docstrings in each module) and the harness they stand on.

Run a study from the repository root as a module, e.g. ``python -m bench.horizon --quick``; the shared machinery
(job runner and cache, statistics, report writers, training and scoring of one run, label oracles) is
:mod:`bench.harness`. Results are written under ``bench/results/<study>/`` (index: ``bench/results/README.md``).
"""
