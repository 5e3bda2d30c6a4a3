"""The job runner every study shares: jobs (dicts) run in spawned worker processes, one per job, `workers` at a time,
each result cached as `<work_dir>/<key>/result.json` together with the `spec` it was made from, so a study that is
interrupted resumes where it stopped and a job whose inputs changed is run again.

A study passes its own `dispatch(job)` (a top-level function of an importable module: the worker process imports it
by name) and `cached(job)`; `dispatch` and `cached` here handle the jobs every study has: `start` (score the warm
start) and `train` (train one run and score it), from `bench.harness.runs`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from . import REPO_ROOT, runs


def study_parser(doc: str, cells, arms, *, study: str, arms_default: str, seeds_default: str,
                 report_help: str = "Write the report from the kept runs only.") -> argparse.ArgumentParser:
    """The command line every study script over this harness shares: `--cell` (repeat), `--arms`, `--seeds`,
    `--workers`, `--work-dir` (default outputs/<study>) and `--report-only`; a study adds its own flags to it."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", choices=cells, action="append", help="Cells to run (repeat).")
    parser.add_argument("--arms", nargs="+", choices=arms, help=f"Arms (default: {arms_default}).")
    parser.add_argument("--seeds", nargs="+", type=int, help=f"Seeds (default: {seeds_default}).")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--work-dir", help=f"Where runs train (default: outputs/{study}).")
    parser.add_argument("--report-only", action="store_true", help=report_help)
    return parser


def sha_of(model_dir: str) -> str:
    """The first 10 hex digits of a model's weights' sha256: a study's work dir is keyed on it, so a remade warm start
    is never mixed with runs of the old one."""
    return hashlib.sha256((REPO_ROOT / model_dir / "model.safetensors").read_bytes()).hexdigest()[:10]


def load_script(name: str):
    """A data script as a module (data/<name>.py, or data/scripts/<name>.py where the scripts moved)."""
    for path in (REPO_ROOT / "data" / f"{name}.py", REPO_ROOT / "data" / "scripts" / f"{name}.py"):
        if path.exists():
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    raise FileNotFoundError(f"data/{name}.py not found")


def read_cached(job: dict, spec: dict) -> dict | None:
    """The cached result of `job` if there is one and it was made from `spec`, else None."""
    path = Path(job["work_dir"]) / job["key"] / "result.json"
    if not path.exists():
        return None
    result = json.loads(path.read_text())
    return result if result.get("spec") == spec else None


def dispatch(job: dict) -> dict:
    """Runs a `start` or `train` job (in its worker process)."""
    return runs.eval_start(job) if job["kind"] == "start" else runs.train_one(job)


def cached(job: dict) -> dict | None:
    """The cached result of a `start` or `train` job whose spec still holds (`runs.job_spec`)."""
    return read_cached(job, runs.job_spec(job))


def with_cpu_seconds(result: dict, job: dict) -> dict:
    """Adds this worker process's CPU seconds (imports, training and scoring: the job's cost, measured) to `result`
    as `cpu_s`, in its cache file too."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 1)
    path = Path(job["work_dir"]) / job["key"] / "result.json"
    if path.exists():
        path.write_text(json.dumps(result, indent=1))
    return result


def run_jobs(
    jobs: list[dict],
    workers: int,
    fresh: bool,
    log,
    cached_only: bool = False,
    dispatch=dispatch,
    cached=cached,
    strict: bool = False,
    blind: bool = False,
) -> dict:
    """Results by (work dir, key); finished runs are read from the cache. With `cached_only`, nothing is run and the
    jobs not cached are left out. `dispatch` runs a job in a worker process and `cached` reads its result back
    (studies pass their own job kinds). A failed job is logged and left out, unless `strict` (then it raises: a worker
    that dies breaks the pool, and every job finished before it is already cached). With `blind`, the progress line
    leaves out each run's held-out scores, and each job is dispatched with `blind` set so that its worker's
    evaluation prints none either (a declared study's confirmatory runs are not read before their cell is whole, and a
    figure in the log is a reading)."""
    results, todo = {}, []
    for job in jobs:
        result = None if fresh else cached(job)
        if result is not None:
            results[job["work_dir"], job["key"]] = result
        else:
            todo.append(job)
    log(f"{len(jobs)} jobs ({len(jobs) - len(todo)} cached), {workers} at a time")
    start = time.perf_counter()
    if todo and cached_only:
        log(f"--cached-only: {len(todo)} jobs not run: " + ", ".join(
            f"{Path(job['work_dir']).name}/{job['key']}" for job in todo))  # fmt: skip
    elif todo:
        context = mp.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, max_tasks_per_child=1) as pool:
            # a blind job's worker prints no score either (`runs.held_out`); `blind` is no part of its cached spec
            futures = {pool.submit(dispatch, {**job, "blind": True} if blind else job): job for job in todo}
            for done, future in enumerate(as_completed(futures), 1):
                job = futures[future]
                try:
                    results[job["work_dir"], job["key"]] = future.result()
                except Exception as error:
                    if strict:
                        raise
                    log(f"{Path(job['work_dir']).name}/{job['key']} failed: {error!r}")
                    continue
                elapsed = time.perf_counter() - start
                log(progress_line(done, len(todo), job, results[job["work_dir"], job["key"]], elapsed, blind))
    return results


def progress_line(done: int, total: int, job: dict, result: dict, elapsed: float, blind: bool = False) -> str:
    """`[done/total] <work dir>/<key>: held-out greedy G, sampled S (M min, ~L min left)`; with `blind`, no scores."""
    scores = result.get("eval") or {}
    held = (f": held-out greedy {scores.get('greedy_accuracy')}, sampled {scores.get('sampled_accuracy')}"
            if scores and not blind else "")  # fmt: skip
    return (f"[{done}/{total}] {Path(job['work_dir']).name}/{job['key']}{held} "
            f"({elapsed / 60:.1f} min, ~{elapsed / done * (total - done) / 60:.1f} min left)")
