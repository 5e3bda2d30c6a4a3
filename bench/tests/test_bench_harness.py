"""bench/ as a package on bench.harness: no import-path edits anywhere under bench/, Holm's correction by hand, the
results folders and their generated index, and every committed Markdown report rewritten from its JSON by the code
that wrote it (each study's `--report-only`)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from bench.harness import RESULTS_DIR, index, reports, stats

REPO = Path(__file__).resolve().parents[2]


def test_nothing_under_bench_edits_the_import_path():
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "bench").rglob("*"))
        if path.suffix in (".py", ".sh") and "results" not in path.parts and "tests" not in path.parts
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "sys.path" in line
    ]
    assert not offenders, f"sys.path under bench/ (run studies as python -m bench.<study>): {offenders}"


def test_holm_by_hand():
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> running max 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    adjusted = stats.holm([0.02, math.nan, 0.01])  # a NaN is left out of the family (m = 2)
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.02)


def test_t_p_value_by_hand():
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.464 on 2 df: two-sided p = 0.0742
    assert stats.t_p_value([1.0, 2.0, 3.0]) == pytest.approx(0.0742, abs=1e-4)
    assert math.isnan(stats.t_p_value([1.0]))


def test_results_hold_study_folders_with_manifests_and_the_generated_index():
    entries = sorted(p.name for p in RESULTS_DIR.iterdir())
    assert [e for e in entries if not (RESULTS_DIR / e).is_dir()] == ["README.md"]
    for folder in (p for p in RESULTS_DIR.iterdir() if p.is_dir()):
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["study"] == folder.name
        assert set(manifest["files"]) == {p.name for p in folder.iterdir() if p.name != "manifest.json"}, folder
        for key in ("what", "script", "commit", "machine", "cost"):
            assert manifest[key], (folder.name, key)
    hashed = [str(p.relative_to(RESULTS_DIR)) for p in RESULTS_DIR.rglob("*")
              if re.search(r"(?<![0-9a-z])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,}(?![0-9a-z])", p.name)]  # fmt: skip
    assert not hashed, f"commit hashes in result names: {hashed}"
    assert (RESULTS_DIR / "README.md").read_text() == index.render(), "run `python -m bench.harness.index`"


def _report_cases():
    from bench import headroom, horizon, learning, teacher_sweep

    cases = [(RESULTS_DIR / "headroom" / "headroom.json", headroom.markdown)]
    cases += [(p, horizon.markdown) for p in sorted(RESULTS_DIR.glob("horizon/**/horizon.json"))]
    cases += [(p.with_suffix(".json"), learning.markdown_table) for p in sorted(RESULTS_DIR.glob("learning/*.md"))]
    cases += [(RESULTS_DIR / "teacher_sweep" / "teacher_sweep.json", teacher_sweep.tables)]
    return cases


OVERHEAD_WRITTEN_BY_OLDER_CODE = {"cpu", "cpu_quick", "cpu_vocab_10reps", "cpu_before_optimization"}
"""Overhead reports whose column notes were written by an earlier overhead_report.py (the notes have changed since):
their Markdown is the record of that run, not regenerated."""


def test_every_committed_report_is_what_its_json_gives():
    stale = []
    for path, table in _report_cases():
        assert path.exists(), path
        if reports.markdown_page(json.loads(path.read_text()), table) != path.with_suffix(".md").read_text():
            stale.append(str(path.relative_to(REPO)))
    from bench import host_cost, teacher_pass
    from bench.overhead_report import markdown_report

    own = {"host_cost": host_cost.markdown, "teacher_pass": teacher_pass.markdown}  # the studies beside overhead.py
    for path in sorted(RESULTS_DIR.glob("overhead/*.json")):
        if path.stem in OVERHEAD_WRITTEN_BY_OLDER_CODE or path.name == "manifest.json":
            continue
        if own.get(path.stem, markdown_report)(json.loads(path.read_text())) != path.with_suffix(".md").read_text():
            stale.append(str(path.relative_to(REPO)))
    assert not stale, f"rewrite with the study's --report-only: {stale}"


def test_report_only_rewrites_the_markdown_without_training(tmp_path):
    from bench import teacher_sweep

    committed = RESULTS_DIR / "teacher_sweep" / "teacher_sweep.json"
    (tmp_path / "teacher_sweep.json").write_text(committed.read_text())
    teacher_sweep.main(["--report-only", "--no-png", "--out-dir", str(tmp_path)], log=lambda *a: None)
    assert (tmp_path / "teacher_sweep.md").read_text() == committed.with_suffix(".md").read_text()


def test_the_docs_sections_the_studies_write_are_what_their_json_gives():
    from bench.harness import sections

    assert sections.stale() == [], "run `python -m bench.harness.sections`"


def test_the_docs_build_imports_no_study():
    import ast

    tree = ast.parse((REPO / "docs" / "hooks.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] in ("bench", "importlib")}, imported


def test_a_blind_progress_line_leaves_out_the_held_out_scores():
    """A declared study's confirmatory runs are not read before their cell is whole: a blind progress line names the
    finished run and its timing, never its scores; a plain one prints both."""
    from bench.harness import jobs

    job, result = {"work_dir": "/tmp/x/cell", "key": "arm__seed100"}, {"eval": {"greedy_accuracy": 0.123, "sampled_accuracy": 0.456}}  # fmt: skip
    plain = jobs.progress_line(2, 4, job, result, elapsed=120.0)
    assert plain == "[2/4] cell/arm__seed100: held-out greedy 0.123, sampled 0.456 (2.0 min, ~2.0 min left)"
    assert jobs.progress_line(2, 4, job, result, elapsed=120.0, blind=True) == "[2/4] cell/arm__seed100 (2.0 min, ~2.0 min left)"  # fmt: skip


def test_a_blind_job_prints_no_held_out_score(monkeypatch, tmp_path, capsys):
    """The worker's evaluation shares the study's log: a blind job's summary lines (which carry the held-out score) go
    to eval.log beside its scores, and the scores it returns are the same as a plain job's."""
    from bench.harness import runs

    def evaluate_model(model_dir, spec, *, temperature, num_samples, limit, output):
        accuracy = 0.375 if temperature == 0.0 else 0.625
        print(f"{model_dir}: accuracy {accuracy} -> {output}")
        return {"n": 8, "num_samples": num_samples, "accuracy": accuracy, "mean_reward": accuracy, "pass_at_k": None}

    monkeypatch.setattr(runs, "evaluate_model", evaluate_model)
    job = {"eval": {}, "eval_limit": None, "temperature": 1.0}
    plain = runs.held_out("m", job, tmp_path / "plain")
    assert "accuracy 0.375" in capsys.readouterr().out
    blind = runs.held_out("m", {**job, "blind": True}, tmp_path / "blind")
    assert capsys.readouterr().out == ""
    assert blind == plain == {"n": 8, "greedy_accuracy": 0.375, "sampled_accuracy": 0.625, "pass_at_k": None}
    logged = (tmp_path / "blind" / "eval.log").read_text()
    assert "accuracy 0.375" in logged and "accuracy 0.625" in logged


def test_blind_run_jobs_dispatches_blind_jobs_and_caches_them_by_their_own_key(monkeypatch):
    """`run_jobs(blind=True)` hands each worker its job with `blind` set (so `runs.held_out` keeps quiet), files the
    result under the job as planned, and the cached spec does not see the flag."""
    from concurrent.futures import Future

    from bench.harness import jobs, runs

    class InProcess:  # the pool, run in this process
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, job):
            future = Future()
            future.set_result(fn(job))
            return future

    seen = []

    def dispatch(job):
        seen.append(job.get("blind"))
        return {"eval": {"greedy_accuracy": 0.5, "sampled_accuracy": 0.5}}

    monkeypatch.setattr(jobs, "ProcessPoolExecutor", InProcess)
    job = {"kind": "train", "work_dir": "/tmp/x/cell", "key": "arm__seed100", "recipe": "r", "recipe_sha": "s",
           "mode": "none", "seed": 100, "max_steps": 2, "overrides": [], "eval_limit": None, "train_eval": None}  # fmt: skip
    lines = []
    for blind in (True, False):
        out = jobs.run_jobs([job], 1, True, lines.append, dispatch=dispatch, cached=lambda j: None, blind=blind)
        assert list(out) == [("/tmp/x/cell", "arm__seed100")]
    assert seen == [True, None]
    assert "blind" not in job and "blind" not in runs.job_spec({**job, "blind": True})
    assert "0.5" not in lines[1] and "0.5" in lines[3]  # [header, blind progress line, header, plain one]


def test_the_credit_methods_study_runs_its_declared_seeds_blind(monkeypatch):
    """bench/credit_methods.py asks for a blind log on the declared seeds (100-115, 200-215), not on exploration ones."""
    from bench import credit_methods as study
    from bench.harness import jobs

    class Asked(Exception):
        pass

    def run_jobs(planned, *args, blind=False, **kwargs):  # stops the study right there: no run, no report
        raise Asked(blind)

    monkeypatch.setattr(jobs, "run_jobs", run_jobs)
    for seeds, blind in ((["100"], True), (["200"], True), (["3"], False)):
        with pytest.raises(Asked) as asked:
            study.main(["--cell", "independent-k8", "--arms", "none", "--seeds", *seeds], log=lambda *_: None)
        assert asked.value.args == (blind,)


def test_tost_by_hand():
    """Differences 1, 2, 3, 4: mean 2.5, sd 1.2910, se 0.6455, df 3 (t_0.95 = 2.3534): the 90% interval is
    [2.5 - 1.5191, 2.5 + 1.5191] = [0.981, 4.019]. Inside (-4.05, 4.05): equivalent; not inside (-4, 4): not, the
    upper one-sided p just above 0.05 (t = -1.5 / 0.6455 = -2.3238)."""
    from bench.harness.stats import tost

    diffs = [1.0, 2.0, 3.0, 4.0]
    near = tost(diffs, 4.0)
    assert near["ci_low"] == pytest.approx(0.9809, abs=1e-3) and near["ci_high"] == pytest.approx(4.0191, abs=1e-3)
    assert near["level"] == pytest.approx(0.9) and near["n_seeds"] == 4
    assert 0.05 < near["p_upper"] < 0.055 and near["p_lower"] < 0.002 and not near["equivalent"]
    inside = tost(diffs, 4.05)
    assert inside["p"] < 0.05 and inside["equivalent"] and inside["ci_high"] < 4.05
    # the interval-inside rule and the two p-values agree at every margin around the boundary
    for margin in (3.9, 4.0, 4.01, 4.02, 4.03, 5.0, 2.0):
        r = tost(diffs, margin)
        assert r["equivalent"] == (-margin < r["ci_low"] and r["ci_high"] < margin)
    # symmetric: a negative mean is judged by the lower test
    assert tost([-d for d in diffs], 4.05)["p_lower"] == pytest.approx(inside["p_upper"])
    # no spread: inside the margin is equivalent, on it is not; one seed: nothing decided
    assert tost([0.01, 0.01], 0.02)["equivalent"] and not tost([0.02, 0.02], 0.02)["equivalent"]
    assert math.isnan(tost([0.0], 1.0)["p"])
    with pytest.raises(ValueError, match="margin must be > 0"):
        tost(diffs, 0.0)


def test_list_files_adds_to_a_manifest_and_rewrites_the_index(monkeypatch, tmp_path):
    from bench.harness import index

    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"study": "study", "what": "w", "script": "s", "commit": "c",
                                                      "machine": "m", "cost": "c", "files": {"a.json": "old"}}))  # fmt: skip
    monkeypatch.setattr(index, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(index, "INDEX", tmp_path / "README.md")
    index.list_files(folder, {"a.json": "new", "b.png": "its plot"})
    assert json.loads((folder / "manifest.json").read_text())["files"] == {"a.json": "new", "b.png": "its plot"}
    assert "| `b.png` | its plot |" in (tmp_path / "README.md").read_text()


def test_reports_are_written_as_strict_json():
    """NaN (no seeds) and an unbounded bootstrap bound (inf) become null, so a strict parser reads the report."""
    import math

    def refuse(constant):
        raise ValueError(constant)

    text = reports.dumps({"a": math.nan, "b": [1.5, math.inf, -math.inf], "c": {"d": (2, None)}, "e": "NaN"})
    assert json.loads(text, parse_constant=refuse) == {"a": None, "b": [1.5, None, None], "c": {"d": [2, None]},
                                                       "e": "NaN"}  # fmt: skip
    assert text.endswith("}\n") and text.startswith("{\n \"a\": null")
