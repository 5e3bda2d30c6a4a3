"""Where GEAR's host-side work goes against GRPO's, per training step: operators dispatched, host-device
synchronizations, and the Python-side parts of the teacher pass, segmentation and weights (issue 75, item 2).

On one H200 at Qwen3-4B's shape GEAR's step took 544 ms of host CPU against GRPO's 262 ms (2.08x,
bench/results/overhead/cuda_h200_quick.json): on a GPU, the host's time that the device waits for is step time. This
study counts, on CPU, what that host time is made of, with torch.profiler over one training step after a warm-up:

    operators       every `aten::` operator the step dispatches (each one a kernel launch or more on a GPU), and the
                    top-level ones (called from Python, not from inside another operator)
    synchronizations  the operators that make the host wait for a GPU: `aten::_local_scalar_dense` (`.item()`,
                    `int()`, `float()`, `bool()` of a tensor), `aten::nonzero` (boolean indexing, `nonzero`),
                    `aten::masked_select`, `aten::unique*`; plus the calls that copy a tensor to the host, counted by
                    wrapping them: `.tolist()` and explicit `.cpu()` / `.to("cpu")` (a copy, hence a wait, where the
                    tensor lives on a GPU; on this CPU every tensor is a host tensor, so these are upper bounds; a
                    `.to(x.device)` counts only where its source line names the CPU)
    regions         the same counts and the profiled time inside GEAR's parts: the teacher's prompts and forward,
                    the divergence (as its own pass, or inside the loss's fused LM head), the credit (segments, weights),
                    the metrics; each synchronization is named by the innermost gear_trl / trl / transformers frame

Configurations: `grpo` (TRL's GRPOTrainer), `gear` (GEARTrainer, `credit: gear`, as on CPU: its divergence inside the
loss's LM head, gear_trl/trainer/fused_head.py), `gear/gpu_path` (the same with the divergence as a pass of its own,
`reverse_kl_and_entropy`, with one `bmm` per row dot: what a CUDA device with Triton runs, TRL's fold being one
kernel there) and `gear/gpu_path@512` (that at `divergence_chunk_size` 512, the Qwen3-4B recipes' setting). The shape
is Qwen3-4B's vocabulary (151,936) and depth (36 layers) on a narrow body (width 128), B = 8 completions of one prompt
(as on the H200), T tokens each (default 512; the H200's 1,024 takes too long on 2 shared cores: the divergence's
share of the operators grows with T, by its per-chunk count for every `divergence_chunk_size` more rows),
`divergence_chunk_size` 64 (the default the H200 ran),
float32, one torch thread. Operator and synchronization counts do not depend on the machine; times do.

    python -m bench.host_cost --label after                       # this checkout's gear_trl
    python -P -m bench.host_cost --label before --gear-src DIR    # another copy of gear_trl, e.g.
        # mkdir DIR && git archive ce4f9b3 gear_trl | tar -x -C DIR; run with PYTHONPATH=DIR:$PWD
    python -m bench.host_cost --report-only                      # rewrite host_cost.md from host_cost.json

Each run adds its label's entry to bench/results/overhead/host_cost.json and rewrites host_cost.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import linecache
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "bench" / "results" / "overhead" / "host_cost.json"
CONFIGS = ("grpo", "gear", "gear/gpu_path", "gear/gpu_path@512")
SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::unique", "aten::_unique2",
            "aten::unique_consecutive", "aten::unique_dim")  # fmt: skip
HOST_COPIES = ("sync::tolist", "sync::to_host")
TARGET = 1.3
"""GEAR's host-side work over GRPO's, at most (issue 75)."""

REGIONS = {
    # region -> (module or "trainer" / "teacher", attribute)
    "teacher prompts": ("teacher", "prompts"),
    "teacher forward": ("teacher", "hidden"),
    "control KL": ("teacher", "control_kl"),
    "divergence, own pass": ("gear_trl.trainer.gear_trainer", "reverse_kl_and_entropy"),
    "LM head forward (loss)": ("trl.kernels.chunked_logprob:ChunkedLogProbFunction", "forward"),
    "LM head forward + divergence (loss)": ("gear_trl.trainer.fused_head:_LogProbsWithDivergence", "forward"),
    "credit": ("trainer", "_credit"),
    "segments": ("gear_trl.credit.modes", "segment_signal"),
    "weights": ("gear_trl.credit.modes", "weights_from_signal"),
    "GEAR metrics": ("trainer", "_log_gear_metrics"),
}


# ---------------------------------------------------------------------------------------------------------------------
# Instrumentation


def _labelled(function, label: str):
    import torch

    if getattr(function, "_host_cost", False):
        return function

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with torch.profiler.record_function(label):
            return function(*args, **kwargs)

    wrapper._host_cost = True
    return wrapper


def _resolve(owner: str):
    import importlib

    module, _, attr = owner.partition(":")
    try:
        target = importlib.import_module(module)
    except ImportError:
        return None
    return getattr(target, attr, None) if attr else target


def instrument(trainer) -> None:
    """Label each region's calls (missing ones are skipped: an older gear_trl may lack some)."""
    for region, (owner, attr) in REGIONS.items():
        target = trainer if owner == "trainer" else getattr(trainer, "teacher", None) if owner == "teacher" else None
        if owner not in ("trainer", "teacher"):
            target = _resolve(owner)
        if target is None or getattr(target, attr, None) is None:
            continue
        setattr(target, attr, _labelled(getattr(target, attr), "region::" + region))


PACKAGES = ("gear_trl/", "trl/", "transformers/", "bench/")


def _caller() -> str:
    """The innermost calling frame in one of PACKAGES, as `package/file.py:line function`."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename.replace(os.sep, "/")
        for package in PACKAGES:
            if f"/{package}" in path:
                return f"{package}{path.split('/' + package, 1)[1]}:{frame.f_lineno} {frame.f_code.co_name}"
        frame = frame.f_back
    return "(other)"


def _caller_line() -> str:
    frame = sys._getframe(2)
    return linecache.getline(frame.f_code.co_filename, frame.f_lineno)


def count_host_copies() -> None:
    """`.tolist()`, `.cpu()` and `.to(<cpu>)` become profiler ranges (`sync::tolist`, `sync::to_host`)."""
    import torch

    if getattr(torch.Tensor.tolist, "_host_cost", False):
        return
    tolist, cpu, to = torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.to

    def to_host(args, kwargs) -> bool:
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, torch.Tensor):
            device = device.device
        return device is not None and not isinstance(device, torch.dtype) and torch.device(device).type == "cpu"

    def tolist_(self, *a, **k):
        with torch.profiler.record_function("sync::tolist@" + _caller()):
            return tolist(self, *a, **k)

    def cpu_(self, *a, **k):
        with torch.profiler.record_function("sync::to_host@" + _caller()):
            return cpu(self, *a, **k)

    def to_(self, *a, **k):
        # `.to(other.device)` is a host tensor here but the device's own on a GPU: only a call that names the CPU
        # in its source line (`.to("cpu")`, `.to(device="cpu")`) is counted.
        if not to_host(a, k) or "cpu" not in _caller_line():
            return to(self, *a, **k)
        with torch.profiler.record_function("sync::to_host@" + _caller()):
            return to(self, *a, **k)

    for wrapper in (tolist_, cpu_, to_):
        wrapper._host_cost = True
    torch.Tensor.tolist, torch.Tensor.cpu, torch.Tensor.to = tolist_, cpu_, to_


# ---------------------------------------------------------------------------------------------------------------------
# Counting


def _source(event) -> str:
    """The innermost function of PACKAGES around the event: the Python frames torch.profiler records (`with_stack`)
    are its ancestors, named `path(line of the def): function`; a wrapped host copy names its calling line."""
    while event is not None:
        if event.name.startswith("sync::"):
            return event.name.split("@", 1)[1]
        name = "/" + event.name.replace(os.sep, "/")  # the profiler may shorten a path to the package's
        for package in PACKAGES:
            if f"/{package}" in name and ".py(" in name:
                path, _, function = name.split("/" + package, 1)[1].partition(": ")
                return f"{package}{path.split('(')[0]} {function}"
        event = event.cpu_parent
    return "(other)"


def _kind(name: str) -> str:
    return name.split("@", 1)[0]


def count(events) -> dict:
    """Operator and synchronization counts of one profiled step, in total and per region."""
    totals = collections.Counter()
    regions: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    region_ms = collections.Counter()
    sources = collections.Counter()
    region_ops: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for event in events:
        name = _kind(event.name)
        if name.startswith("region::"):
            region = name.split("::", 1)[1]
            regions[region]["calls"] += 1
            # only the outermost call of a region counts its time (regions may nest: segments inside credit)
            parent = event.cpu_parent
            while parent is not None and parent.name != name:
                parent = parent.cpu_parent
            if parent is None:
                region_ms[region] += event.cpu_time_total / 1000
            continue
        ancestors = []
        parent = event.cpu_parent
        while parent is not None:
            ancestors.append(_kind(parent.name))
            parent = parent.cpu_parent
        inside = {a.split("::", 1)[1] for a in ancestors if a.startswith("region::")}
        if name.startswith("aten::"):
            keys = ["operators"] + (
                ["top-level operators"] if not any(a.startswith("aten::") for a in ancestors) else []
            )
            is_sync = name in SYNC_OPS and not any(a in SYNC_OPS or a in HOST_COPIES for a in ancestors)
        elif name in HOST_COPIES:
            keys, is_sync = [], not any(a in HOST_COPIES for a in ancestors)
        else:
            continue
        if is_sync:
            kind = name.removeprefix("aten::").removeprefix("sync::")
            keys += ["synchronizations", f"sync: {kind}"]
            sources[f"{kind} @ {_source(event)}"] += 1
        for key in keys:
            totals[key] += 1
            for region in inside:
                regions[region][key] += 1
        if "top-level operators" in keys:
            for region in inside:
                region_ops[region][name] += 1
    return {
        "totals": dict(totals),
        "regions": {
            r: {**dict(c), "profiled_ms": round(region_ms[r], 2), "top_operators": dict(region_ops[r].most_common(8))}
            for r, c in sorted(regions.items())
        },
        "sync_sources": dict(sources.most_common()),
    }


# ---------------------------------------------------------------------------------------------------------------------
# The step


def build(config: str, shape, opts, model, tokenizer, rows):
    from datasets import Dataset

    from bench.overhead_run import fix_generation, make_trainer

    name = "grpo" if config == "grpo" else "gear/gear"
    chunk = config.partition("@")[2]
    if chunk:  # another divergence_chunk_size (512: the Qwen3-4B and 8B GEAR recipes')
        opts = argparse.Namespace(**{**vars(opts), "divergence_chunk_size": int(chunk)})
    trainer, kind = make_trainer(name, model, tokenizer, Dataset.from_list(rows), shape, opts, tempfile.mkdtemp())
    instrument(trainer)
    return trainer, kind, fix_generation


@contextlib.contextmanager
def gpu_path(on: bool):
    """What a CUDA device with Triton takes: TRL's fold stays TRL's, GEAR's divergence is a pass of its own, its row
    dots one `bmm` each (`gear_trl.credit.divergence._row_dot`'s branch off the CPU)."""
    try:
        from gear_trl.trainer.fused_head import FusedDivergence
    except ImportError:
        FusedDivergence = None
    if not on or FusedDivergence is None:
        yield
        return
    import torch

    from gear_trl.credit import divergence, segments

    original, per_row = FusedDivergence.unsupported, divergence._PER_ROW_DOT_DEVICES
    FusedDivergence.unsupported = lambda self, *a: "forced: the CUDA path (bench/host_cost.py)"
    divergence._PER_ROW_DOT_DEVICES = ()  # one bmm per row dot, as on CUDA
    to_host = getattr(segments, "_to_host", None)  # since issue 75: off the CPU, one stacked copy to the host
    if to_host is not None:
        segments._to_host = lambda kl, entropy, mask, turns: (
            *segments._stacked_to_host([kl, entropy], [mask]),
            None if turns is None else turns.detach().to("cpu", torch.bool),
        )
    try:
        yield
    finally:
        FusedDivergence.unsupported, divergence._PER_ROW_DOT_DEVICES = original, per_row
        if to_host is not None:
            segments._to_host = to_host


def measure(config: str, opts, log) -> dict:
    import torch
    from transformers import AutoTokenizer

    from bench.overhead_measure import HostMonitor, StepRecorder
    from bench.overhead_run import run_step
    from bench.overhead_shapes import TINY_MODEL, build_model, build_rows, draw_completions

    shape = make_shape(opts)
    tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
    model = build_model(shape, "cpu")
    rows = build_rows(shape, tokenizer)
    trainer, kind, fix_generation = build(config, shape, opts, model, tokenizer, rows)
    completions = {"ids": draw_completions(shape, model.config.vocab_size, tokenizer, shape.warmup_length, 0)}
    fix_generation(trainer, kind, completions)
    monitor = HostMonitor()
    recorder = StepRecorder(monitor, lambda: None)
    with gpu_path(config.startswith("gear/gpu_path")):
        run_step(trainer, kind, rows, recorder, "cpu", seed=0)  # warm-up: code paths, allocator
        completions["ids"] = draw_completions(shape, model.config.vocab_size, tokenizer, shape.length, 0)
        count_host_copies()
        cpu_start = time.process_time()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True) as prof:
            run_step(trainer, kind, rows, recorder, "cpu", seed=0)
        cpu_s = time.process_time() - cpu_start
    monitor.shutdown()
    result = count(prof.events())
    result["step_cpu_s"] = round(cpu_s, 3)  # the profiled step's, profiler included

    log(f"{config}: {result['totals']} ({cpu_s:.1f} s CPU)")
    return result


def make_shape(opts):
    from bench.overhead_shapes import VOCAB_BACKBONE, Shape

    return Shape(
        "host_cost",
        "vocab",
        batch=opts.batch,
        num_generations=opts.batch,
        length=opts.completion_length,
        reps=1,
        warmup_length=32,
        model_config={**VOCAB_BACKBONE, "num_hidden_layers": opts.layers},
    )


# ---------------------------------------------------------------------------------------------------------------------
# Report


def _ratio(totals: dict, grpo: dict, key: str) -> float:
    return totals.get(key, 0) / grpo[key] if grpo.get(key) else float("nan")


def markdown(report: dict) -> str:
    meta = report["meta"]
    labels = list(report["runs"])
    lines = [
        "# GEAR's host-side work against GRPO's, per step",
        "",
        (
            f"`python -m bench.host_cost` (bench/host_cost.py): one training step after a warm-up, profiled with "
            f"torch.profiler on CPU; {meta['shape']}. Operators are `aten::` calls (top-level: called from Python); "
            "synchronizations are the calls that make the host wait for a GPU (`.item()` and kin, `nonzero` and boolean "
            "indexing, `masked_select`, `unique`) and the explicit copies to the host (`.tolist()`, `.cpu()`, "
            "`.to('cpu')`, counted by wrapping them: on this CPU every tensor is a host tensor, so those are upper bounds "
            "of what a GPU would wait for). `gear/gpu_path` is GEAR with its divergence as a pass of its own, the path a "
            "CUDA device with Triton takes. Counts do not depend on the machine and are the primary figures; the "
            f"times are from {meta['machine']}, shared with other processes while these ran."
        ),
        "",
        (
            "| run | configuration | operators | top-level operators | synchronizations | x GRPO operators "
            "| x GRPO top-level | x GRPO synchronizations | profiled step CPU s |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label in labels:
        runs = report["runs"][label]
        grpo = runs["configs"]["grpo"]["totals"]
        for config, result in runs["configs"].items():
            t = result["totals"]
            ratio = functools.partial(_ratio, t, grpo)
            lines.append(
                f"| {label} ({runs['gear_trl']}) | {config} | {t.get('operators', 0):,} "
                f"| {t.get('top-level operators', 0):,} | {t.get('synchronizations', 0):,} "
                f"| {ratio('operators'):.2f}x | {ratio('top-level operators'):.2f}x "
                f"| {ratio('synchronizations'):.2f}x | {result['step_cpu_s']:.1f} |"
            )
    target = (
        f"Target: GEAR's host-side work at most {TARGET}x GRPO's (issue 75). Where GEAR's extra top-level operators "
        "and its own synchronizations (those whose source is in gear_trl) are:"
    )
    lines += ["", target, ""]
    for label in labels:
        configs = report["runs"][label]["configs"]
        grpo = configs["grpo"]["totals"]["top-level operators"]
        grpo_head = configs["grpo"]["regions"].get("LM head forward (loss)", {}).get("top-level operators", 0)
        for config, result in configs.items():
            if config == "grpo":
                continue
            top = result["totals"]["top-level operators"]
            regions = {r: c.get("top-level operators", 0) for r, c in result["regions"].items()}
            divergence = regions.get("divergence, own pass", 0)
            if "LM head forward + divergence (loss)" in regions:  # GEAR's fold in place of GRPO's: the difference
                divergence += regions["LM head forward + divergence (loss)"] - grpo_head
            own = sum(n for source, n in result["sync_sources"].items() if "gear_trl/" in source)
            verdict = "within" if top / grpo <= TARGET else "over"
            lines.append(
                f"- {label}, {config}: {top / grpo:.2f}x GRPO's top-level operators ({verdict} the target): "
                f"{top - grpo:+,} of which the teacher's forward {regions.get('teacher forward', 0):,}, the divergence "
                f"{divergence:,}, the credit {regions.get('credit', 0):,}, the metrics {regions.get('GEAR metrics', 0):,};"
                f" {own} synchronizations from gear_trl."
            )

    for label in labels:
        configs = report["runs"][label]["configs"]
        lines += ["", f"## {label}: where GEAR's operators and synchronizations are", ""]
        lines += ["| region | configuration | calls | operators | top-level | synchronizations | profiled ms |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for config, result in configs.items():
            for region, c in result["regions"].items():
                lines.append(
                    f"| {region} | {config} | {c.get('calls', 0)} | {c.get('operators', 0):,} "
                    f"| {c.get('top-level operators', 0):,} | {c.get('synchronizations', 0)} | {c['profiled_ms']:.1f} |"
                )
        lines += ["", "Synchronizations by kind and source (innermost gear_trl / trl / transformers frame):", ""]
        lines += ["| configuration | kind @ source | count |", "|---|---|---|"]
        for config, result in configs.items():
            for source, n in result["sync_sources"].items():
                lines.append(f"| {config} | `{source}` | {n} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--gear-src", default=None, help="the gear_trl copy on the path (recorded, not imported)")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--completion-length", type=int, default=512)
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        out.with_suffix(".md").write_text(markdown(json.loads(out.read_text())))
        return 0
    import torch

    import gear_trl

    torch.set_num_threads(1)
    opts = argparse.Namespace(
        device="cpu", seed=0, num_iterations=1, divergence_chunk_size=64, sdpo_topk=20, **vars(args)
    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "gear_trl"], capture_output=True, text=True, cwd=REPO_ROOT, check=False
    )
    source = args.gear_src or (commit.stdout.strip() + (" + uncommitted changes" if dirty.stdout.strip() else ""))
    report = json.loads(out.read_text()) if out.exists() else {"runs": {}}
    report["meta"] = {
        "shape": (
            f"Qwen3's vocabulary (151,936) on a {args.layers}-layer, 128-wide random Qwen3 body, B = {args.batch} "
            f"completions of one prompt, T = {args.completion_length} tokens, divergence_chunk_size 64, float32, one "
            "torch thread"
        ),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "torch": torch.__version__,
    }
    runs = report["runs"].get(args.label, {"configs": {}})  # a rerun of some configurations keeps the others
    runs.update(gear_trl=source, gear_trl_path=str(Path(gear_trl.__file__).parent))
    for config in args.configs.split(","):
        runs["configs"][config] = measure(config, opts, print)
    runs["configs"] = {c: runs["configs"][c] for c in CONFIGS if c in runs["configs"]}
    report["runs"][args.label] = runs
    out.write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
