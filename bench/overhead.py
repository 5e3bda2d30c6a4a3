"""What GEAR costs over GRPO, next to TRL's own self-distillation trainer (SDPO).

One process builds every trainer once on the same model and the same rows, then runs training steps round-robin over
the configurations (warm-up first, then R repetitions), so machine noise falls on all of them alike:

    grpo                      TRL's GRPOTrainer
    gear/<credit>             GEARTrainer for credit none, token, turn, fixed, gear-no-entropy, gear
    sdpo/full_logits          trl.experimental.sdpo.SDPOTrainer, full-vocabulary distillation ([B, T, V] logits)
    sdpo/topk_logits          the same on the student's top-k logits
    gigpo                     gear_trl.credit.gigpo_advantages on 64 rollouts x 10 steps of string anchors

A step is what the trainers' own entry points do for one generation batch: `_generate_and_score_completions(rows)`
(SDPO: `_prepare_training_batch(rows)`) then `compute_loss(model, batch).backward()`. Generation is replaced by fixed,
pre-drawn completion ids of length T without EOS, so every trainer scores the same batch and generation time (~0) is
left out; the tiny shape also times one real HF `generate` call (`hf_generate`). Phases are timed by wrapping the
trainers' methods: rewards (`_calculate_rewards`), teacher prompts, the teacher pass (GEAR: every backbone pass it adds
plus `reverse_kl_and_entropy`, the LM head over chunks; SDPO: its no-grad `_forward_logits`), segments and weights, and
the loss (`compute_loss` + `backward`). A phase can sit inside another: SDPO's teacher forward, and GEAR's LM-head
chunks once they read the student's states from the loss's own forward, run inside `compute_loss`; the report says so.
SDPO's teacher gets the information GEAR's gets: the ground truth, as environment feedback in its reprompt
(`include_environment_feedback`, `use_successful_as_teacher=False`), with the live policy as teacher and reverse KL.

CPU runs use one torch thread (`--threads`): on 2 cores shared with other processes, a second OpenMP thread makes each
op wait at a barrier for a descheduled thread. `--gear-src DIR` benchmarks another copy of gear_trl (e.g.
`git archive <commit> gear_trl | tar -x -C DIR`) with the same harness, for before/after figures.

Memory: the extra peak of the step and of each phase over the step's start. On CPU a thread samples, at about 1 kHz,
the bytes allocated through glibc's malloc (`mallinfo2`; the RSS where that is missing): unlike the RSS it drops when a
tensor is freed even if glibc keeps the pages, so a phase reusing memory freed by an earlier one still shows its own
peak. On CUDA: `torch.cuda.max_memory_allocated`, with `reset_peak_memory_stats` at each phase boundary.

    python -m bench.overhead --quick                 # < 5 minutes on 2 CPU cores
    python -m bench.overhead --device cpu            # tiny + vocab shapes, ~15 minutes on 2 CPU cores
    python -m bench.overhead --device cuda           # Qwen3-4B-shaped model, random weights, bf16 (one H100)
    python -m bench.overhead --shape vocab --profile # where a GEAR step's time goes (cProfile + torch.profiler)
    python -m bench.overhead --report-only bench/results/overhead/cpu.json   # rewrite its .md from the JSON

Writes `bench/results/overhead/<device>[_quick].json` and `.md`. With `--gear-src DIR` the study runs again in a
subprocess whose `PYTHONPATH` puts DIR's gear_trl first (`python -P`, so the checkout's own is not on the path).

This file is the command line; the rest sits beside it: `overhead_shapes.py` (the configurations, the shapes, a
shape's model and rows), `overhead_measure.py` (memory monitors, the step recorder, the method wrappers),
`overhead_run.py` (trainers, the timed round-robin, profiling) and `overhead_report.py` (targets and tables from
a report's JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from bench.overhead_measure import CUDAMonitor, HostMonitor
from bench.overhead_report import (
    MAX_DIVERGENCE_VS_SDPO,
    MAX_END_TO_END_RATIO,
    MAX_EXTRA_MEMORY_FRACTION,
    MAX_GIGPO_FRACTION,
    MAX_LONG_PROMPT_STEP_RATIO,
    MAX_PREFIX_SHARING_RATIO,
    MAX_STEP_RATIO,
    _source_line,
    evaluate_targets,
    markdown_report,
    print_report,
    readme_table,
)
from bench.overhead_run import benchmark_shape, profile_shape
from bench.overhead_shapes import (
    NO_SHARING,  # noqa: F401 (tests read the configuration names from this module)
    PSEUDO_CONFIGS,
    REPO_ROOT,
    TRAINER_CONFIGS,
    describe_model,
    make_shapes,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


RESULTS_DIR = REPO_ROOT / "bench" / "results" / "overhead"


# ---------------------------------------------------------------------------------------------------------------------
# CLI


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--shape",
        choices=["tiny", "long_prompt", "vocab", "qwen3-4b", "all"],
        default=None,
        help="default: tiny + long_prompt + vocab on cpu, qwen3-4b on cuda",
    )
    parser.add_argument(
        "--quick", action="store_true", help="fewer reps, shorter completions (< 5 min on 2 CPU cores)"
    )
    parser.add_argument("--reps", type=int, default=None, help="measured repetitions per configuration")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up rounds (short completions, not recorded)")
    parser.add_argument("--batch", type=int, default=None, help="completions per step B")
    parser.add_argument("--num-generations", type=int, default=None)
    parser.add_argument("--completion-length", type=int, default=None, help="T")
    parser.add_argument("--num-iterations", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=None, help="prompt length of the long_prompt shape")
    parser.add_argument(
        "--tiny-model",
        action="store_true",
        help="run the shapes on data/tiny-qwen3 (16-wide heads, hidden 64) instead of their own backbones",
    )
    parser.add_argument(
        "--divergence-chunk-size", type=int, default=None, help="default: GEARConfig's divergence_chunk_size"
    )
    parser.add_argument("--sdpo-topk", type=int, default=20, help="SDPO distillation_topk (GEAR's divergence_top_k)")
    parser.add_argument(
        "--configs",
        default=",".join(TRAINER_CONFIGS + PSEUDO_CONFIGS),
        help="comma-separated subset of " + ", ".join(TRAINER_CONFIGS + PSEUDO_CONFIGS),
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", default=str(RESULTS_DIR))
    parser.add_argument("--tag", default=None, help="suffix of the output files (default: 'quick' with --quick)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: 1 on cpu, see `_meta`; torch's default on cuda)",
    )
    parser.add_argument(
        "--gear-src",
        default=None,
        help="import gear_trl from this directory instead of the repository (e.g. an exported earlier "
        "commit, for before/after figures)",
    )
    parser.add_argument("--gear-src-label", default=None, help="what --gear-src holds, for the report")
    parser.add_argument("--profile", action="store_true", help="profile one step per configuration instead")
    parser.add_argument("--dry-run", action="store_true", help="print the shapes and model geometry, run nothing")
    parser.add_argument(
        "--readme-table", default=None, metavar="JSON", help="print the README's performance table from a report"
    )
    args = parser.parse_args(argv)
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = set(args.configs) - set(TRAINER_CONFIGS + PSEUDO_CONFIGS)
    if unknown:
        parser.error(f"unknown configurations {sorted(unknown)}")
    return args


GEAR_SRC_ENV = "GEAR_BENCH_GEAR_SRC"
"""Set in the subprocess `--gear-src` starts: the source tree its gear_trl must come from."""


def _use_gear_src(path: str, argv: list[str]) -> None:
    """Measure the gear_trl of another source tree: run this command again as `python -P -m bench.overhead` with
    `PYTHONPATH` = that tree, then this repository (for `bench`), and exit with its status. In that subprocess (the
    environment names the tree), check that gear_trl is the tree's."""
    source = Path(path).resolve()
    if not (source / "gear_trl" / "__init__.py").exists():
        raise SystemExit(f"--gear-src {path}: no gear_trl package there")
    if os.environ.get(GEAR_SRC_ENV) == str(source):
        import gear_trl

        if Path(gear_trl.__file__).resolve().parent.parent != source:
            raise SystemExit(f"--gear-src {path}: gear_trl is imported from {gear_trl.__file__}")
        return
    env = {
        **os.environ,
        GEAR_SRC_ENV: str(source),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(source), str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run([sys.executable, "-P", "-m", "bench.overhead", *argv], env=env, check=False)
    raise SystemExit(done.returncode)


def _gear_source(args) -> dict:
    import gear_trl

    package = Path(gear_trl.__file__).resolve().parent
    info = {"path": str(package), "label": args.gear_src_label}
    if package.parent == REPO_ROOT:
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", "gear_trl"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        info["uncommitted_changes"] = [line[3:] for line in status.splitlines()]
    return info


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return out.stdout.strip() or None


def _meta(args, argv, monitor) -> dict:
    import torch
    import transformers
    import trl

    commit = _git_commit()
    if args.device == "cuda":
        machine = torch.cuda.get_device_name()
    else:
        cpu = platform.processor() or platform.machine()
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        machine = f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
    return {
        "device": args.device,
        "machine": machine,
        "command": "python -m bench.overhead",  # reports before bench/ was a package: python -m bench.overhead
        "argv": argv,
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "trl": trl.__version__,
        "gear_trl": _gear_source(args),
        "threads": torch.get_num_threads(),
        "quick": args.quick,
        "warmup": args.warmup,
        "num_iterations": args.num_iterations,
        "divergence_chunk_size": args.divergence_chunk_size,
        "sdpo_topk": args.sdpo_topk,
        "memory_method": monitor.method,
        "step_definition": "prepare (_generate_and_score_completions / SDPO _prepare_training_batch; fixed "
        "generation) "
        "+ loss (compute_loss + backward), gradient_accumulation_steps=1",
        "targets": {
            "step_time_ratio_max": MAX_STEP_RATIO,
            "extra_memory_fraction_max": MAX_EXTRA_MEMORY_FRACTION,
            "divergence_vs_sdpo_full_max": MAX_DIVERGENCE_VS_SDPO,
            "gigpo_fraction_max": MAX_GIGPO_FRACTION,
            "long_prompt_step_time_ratio_max": MAX_LONG_PROMPT_STEP_RATIO,
            "teacher_prefix_sharing_ratio_max": MAX_PREFIX_SHARING_RATIO,
            "end_to_end_ratio_max": MAX_END_TO_END_RATIO,
        },
    }


def main(argv=None, log=print) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    shapes = make_shapes(args)
    if args.gear_src:
        _use_gear_src(args.gear_src, argv)
    if args.divergence_chunk_size is None:  # the default of the gear_trl being measured
        from gear_trl.trainer.gear_config import GEARConfig

        args.divergence_chunk_size = GEARConfig.__dataclass_fields__["divergence_chunk_size"].default
    if args.readme_table:
        text = readme_table(json.loads(Path(args.readme_table).read_text()))
        log(text)
        return {"readme_table": text}
    if args.dry_run:
        plan = [dict(asdict(s), **({} if s.model == "tiny" else describe_model(s))) for s in shapes]
        log(json.dumps(plan, indent=2))
        return {"plan": plan}

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device")
    previous_threads = torch.get_num_threads()
    # The CPU runs use one intra-op thread: on 2 shared cores, a second OpenMP thread makes every op wait at a barrier
    # for a thread the scheduler has parked behind other processes (a tiny-model step took 20x longer in a probe).
    threads = args.threads or (1 if args.device == "cpu" else None)
    if threads:
        torch.set_num_threads(threads)
    try:
        return _run(args, argv, shapes, log)
    finally:
        torch.set_num_threads(previous_threads)


def _run(args, argv, shapes, log) -> dict:
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = args.tag if args.tag is not None else ("quick" if args.quick else "")
    suffix = f"_{tag}" if tag else ""

    if args.profile:
        text = "\n".join(profile_shape(shape, args, log) for shape in shapes)
        path = out_dir / f"profile_{'_'.join(s.name for s in shapes)}_{args.device}{suffix}.md"
        source = _source_line({"gear_trl": _gear_source(args), "commit": _git_commit()})
        header = f"# Profile: `python -m bench.overhead {' '.join(argv)}`\n\ngear_trl: {source}.\n\n"
        path.write_text(header + text)
        log(f"wrote {path}")
        return {"profile": str(path)}

    monitor = CUDAMonitor() if args.device == "cuda" else HostMonitor()
    meta = _meta(args, argv, monitor)  # before the run: the repository may move on while it runs
    started = time.perf_counter()
    try:
        results = {shape.name: benchmark_shape(shape, args, monitor, log) for shape in shapes}
    finally:
        monitor.shutdown()
    for shape in shapes:
        if shape.model != "tiny":
            results[shape.name]["model"].update(describe_model(shape))
    report = {
        "meta": dict(meta, wall_s=time.perf_counter() - started),
        "shapes": results,
        "targets": evaluate_targets(results, args.device),
    }
    json_path = out_dir / f"{args.device}{suffix}.json"
    md_path = out_dir / f"{args.device}{suffix}.md"
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    md_path.write_text(markdown_report(report))
    print_report(report, log)
    log(f"wrote {json_path} and {md_path} ({report['meta']['wall_s'] / 60:.1f} min)")
    return report


if __name__ == "__main__":
    main()
