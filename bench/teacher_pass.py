"""GEAR's teacher pass against TRL SDPO's, part by part, on CPU at Qwen3's vocabulary (issue 75, item 3).

On one H200 at Qwen3-4B's shape GEAR's teacher pass took 279 ms against SDPO's 192 ms (top-k) and 234 ms (full
logits) (bench/results/overhead/cuda_h200_quick.json). The two phases are not the same work: SDPO's "teacher" is its
no-grad forward to teacher logits (backbone + LM head), and its divergence is computed later, from those logits and
the student's, inside the loss; GEAR's is the teacher backbone plus the divergence pass, which on a GPU projects both
the student's and the teacher's states through the head a chunk at a time (TRL's Triton fold does not hand GEAR the
student's logits) and gives the KL and the student entropy per token. This study times each part alone on the same
states, so that the two add up to comparable wholes:

    forward          the teacher's forward over prompt + completion: GEAR's backbone to final states, SDPO's model
                     forward to [B, T, V] logits (backbone + head)
    divergence       GEAR: `reverse_kl_and_entropy` from student and teacher states (two head GEMMs per chunk, KL and
                     entropy), per `divergence_chunk_size`, as of ce4f9b3 and now; SDPO: its loss's divergence from
                     the two [B, T, V] logits (`compute_full_logit_self_distillation_loss`, and the top-k one), plus
                     the one head GEMM it needs for the teacher (the student's logits come from its loss forward)
    prefix sharing   whether GEAR's shared-prefix teacher pass runs at the shape (`prefix_sharing_plan`): at
                     55-token prompts and 1,024-token completions it does not (it would compute 95% of the full pass's
                     tokens, over the 50% limit), so it costs and saves nothing there

Operators per part are counted with torch.profiler (`aten::` calls; on a GPU each is a launch or more). One torch
thread; times are medians of `--reps` after a warm-up, on a machine shared with other processes.

    python -m bench.teacher_pass                      # B = 8, T = 256 by default; writes teacher_pass.{json,md}
    python -m bench.teacher_pass --report-only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parent.parent
OUT = REPO_ROOT / "bench" / "results" / "overhead" / "teacher_pass.json"
BEFORE_COMMIT = "ce4f9b3"


def _divergence_module(commit: str | None):
    """gear_trl.credit.divergence now, or as of `commit` (`git show`, loaded on its own: it imports torch only)."""
    if commit is None:
        from gear_trl.credit import divergence

        return divergence
    source = subprocess.run(
        ["git", "show", f"{commit}:gear_trl/credit/divergence.py"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=True,
    ).stdout
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"gear_divergence_{commit}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"gear_divergence_{commit}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _time_all(fns: dict, reps: int, log) -> dict:
    """Each part's median and fastest time over `reps` rounds, the parts interleaved round-robin (so that other
    processes' load falls on all alike), after one warm-up round; and its operators, counted in one profiled call."""
    import torch

    times = {name: [] for name in fns}
    with torch.no_grad():
        for rep in range(reps + 1):
            for name, fn in fns.items():
                start = time.perf_counter()
                fn()
                if rep:  # round 0 warms up
                    times[name].append(time.perf_counter() - start)
            log(f"round {rep} of {reps}")
        out = {}
        for name, fn in fns.items():
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                fn()
            ops = [e for e in prof.events() if e.name.startswith("aten::")]
            top = [e for e in ops if not _has_aten_parent(e)]
            out[name] = {
                "median_s": statistics.median(times[name]),
                "min_s": min(times[name]),
                "operators": len(ops),
                "top_level": len(top),
            }
    return out


def _has_aten_parent(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            return True
        parent = parent.cpu_parent
    return False


def measure(args, log) -> dict:
    import torch
    from transformers import AutoTokenizer
    from trl.experimental.sdpo.loss_utils import (
        compute_full_logit_self_distillation_loss,
        compute_topk_self_distillation_loss,
    )

    from bench.overhead_shapes import TINY_MODEL, VOCAB_BACKBONE, Shape, build_model
    from gear_trl.teacher.teacher import prefix_sharing_plan, prefix_sharing_tokens

    torch.set_num_threads(1)
    shape = Shape("teacher_pass", "vocab", args.batch, args.batch, args.completion_length, 1, 16,
                  model_config={**VOCAB_BACKBONE, "num_hidden_layers": args.layers})  # fmt: skip
    model = build_model(shape, "cpu").eval()
    AutoTokenizer.from_pretrained(TINY_MODEL)
    vocab, batch, length, prompt = model.config.vocab_size, args.batch, args.completion_length, args.prompt_tokens
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (batch, prompt + length), generator=g)
    ids[:, :prompt] = ids[0, :prompt]  # one prompt, repeated: a GRPO group
    attention = torch.ones_like(ids)
    weight = model.get_output_embeddings().weight
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[:, -length // 8 :] = torch.arange(length // 8) < torch.randint(0, length // 8, (batch, 1), generator=g)
    with torch.no_grad():
        states = model.model(input_ids=ids, attention_mask=attention).last_hidden_state[:, prompt - 1 : -1]
        student = states + 0.05 * torch.randn(states.shape, generator=g)  # a student close to the teacher
        teacher_logits = states @ weight.T
        student_logits = student @ weight.T
    fns = {}

    def forward_gear():
        return model.model(input_ids=ids, attention_mask=attention).last_hidden_state

    def forward_sdpo():  # SDPO's `_forward_logits`: logits of the completion positions (+1), over the vocabulary
        return model(input_ids=ids, attention_mask=attention, logits_to_keep=length + 1).logits

    fns["forward: GEAR (backbone to states)"] = forward_gear
    fns["forward: SDPO (backbone + head to logits)"] = forward_sdpo
    versions = {"ce4f9b3": _divergence_module(BEFORE_COMMIT), "now": _divergence_module(None)}

    def divergence(module, chunk: int, devices: tuple):
        """reverse_kl_and_entropy with the row dots of a CPU (one BLAS dot per row) or a GPU (one bmm each; its
        operator count is a GPU's launches)."""

        def run():
            per_row, module._PER_ROW_DOT_DEVICES = module._PER_ROW_DOT_DEVICES, devices
            try:
                return module.reverse_kl_and_entropy(student, states, weight, mask, chunk_size=chunk)
            finally:
                module._PER_ROW_DOT_DEVICES = per_row

        return run

    for chunk in args.chunks:
        for label, module in versions.items():
            for branch, devices in (("CPU branch", ("cpu",)), ("GPU branch", ())):
                fns[f"divergence: GEAR, chunk {chunk}, {label}, {branch}"] = divergence(module, chunk, devices)
    fns["divergence: SDPO teacher head GEMM ([B, T, H] x [H, V])"] = lambda: states @ weight.T
    fns["divergence: SDPO full_logits loss from logits"] = lambda: compute_full_logit_self_distillation_loss(
        student_logits, teacher_logits, distillation_alpha=1.0
    )
    fns["divergence: SDPO topk_logits loss from logits (k 20)"] = lambda: compute_topk_self_distillation_loss(
        student_logits, teacher_logits, distillation_topk=20, distillation_alpha=1.0, distillation_add_tail=True
    )
    parts = _time_all(fns, args.reps, log)
    kl_now, _ = versions["now"].reverse_kl_and_entropy(student, states, weight, mask, chunk_size=args.chunks[0])
    kl_before, _ = versions["ce4f9b3"].reverse_kl_and_entropy(student, states, weight, mask, chunk_size=args.chunks[0])
    units = prefix_sharing_plan([ids[0, :prompt].tolist()] * batch, batch)
    full_tokens, shared_tokens = prefix_sharing_tokens(units, length)
    h200 = {"prompt": 55, "length": 1024}
    h200_units = prefix_sharing_plan([list(range(h200["prompt"]))] * 8, 8)
    h200_full, h200_shared = prefix_sharing_tokens(h200_units, h200["length"])
    return {
        "parts": parts,
        "identical_kl_now_vs_before": bool(torch.equal(kl_now, kl_before)),
        "prefix_sharing": {
            "this_shape": {"full_tokens": full_tokens, "shared_tokens": shared_tokens},
            "h200_shape": {"full_tokens": h200_full, "shared_tokens": h200_shared, **h200},
            "max_ratio": 0.5,
        },
    }


def markdown(report: dict) -> str:
    meta, parts = report["meta"], report["parts"]
    lines = [
        "# GEAR's teacher pass against TRL SDPO's, part by part (CPU)",
        "",
        (
            f"`python -m bench.teacher_pass`: {meta['shape']}; one torch thread on {meta['machine']}, shared with other "
            f"processes while this ran (times are medians of {meta['reps']} rounds after a warm-up round, the parts interleaved; operators are counted, "
            "and do not depend on the machine). GEAR's divergence is timed as of ce4f9b3 and now on the same states; "
            f"their KL is bit-identical: {report['identical_kl_now_vs_before']}."
        ),
        "",
        "| part | median | fastest | operators | top-level operators |",
        "|---|---|---|---|---|",
    ]
    for name, x in parts.items():
        lines.append(
            f"| {name} | {x['median_s'] * 1000:.0f} ms | {x['min_s'] * 1000:.0f} ms | {x['operators']:,} "
            f"| {x['top_level']:,} |"
        )
    sharing = report["prefix_sharing"]
    lines += [
        "",
        (
            "Comparable wholes (no-grad work a step adds for the teacher): GEAR = forward to states + divergence; "
            "SDPO = forward to logits + its loss's divergence (the student's logits come from the loss forward it "
            "makes anyway)."
        ),
        "",
    ]
    for chunk in meta["chunks"]:
        gear = (
            parts["forward: GEAR (backbone to states)"]["median_s"]
            + parts[f"divergence: GEAR, chunk {chunk}, now, CPU branch"]["median_s"]
        )
        lines.append(f"- GEAR, chunk {chunk}: {gear * 1000:.0f} ms")
    for mode in ("full_logits", "topk_logits"):
        key = next(k for k in parts if k.startswith(f"divergence: SDPO {mode}"))
        sdpo = parts["forward: SDPO (backbone + head to logits)"]["median_s"] + parts[key]["median_s"]
        lines.append(f"- SDPO {mode}: {sdpo * 1000:.0f} ms")
    lines += [
        "",
        (
            "Prefix sharing: at this shape the shared pass would compute "
            f"{sharing['this_shape']['shared_tokens']:,} of the full pass's {sharing['this_shape']['full_tokens']:,} "
            f"tokens; at the H200's (prompts of {sharing['h200_shape']['prompt']} tokens, "
            f"{sharing['h200_shape']['length']:,}-token completions, 8 a prompt) "
            f"{sharing['h200_shape']['shared_tokens']:,} of {sharing['h200_shape']['full_tokens']:,}: over the "
            f"{sharing['max_ratio']:.0%} limit, so GEAR runs the full pass there, as SDPO does."
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--completion-length", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=55)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--chunks", default="64,512")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        out.with_suffix(".md").write_text(markdown(json.loads(out.read_text())))
        return 0
    args.chunks = [int(c) for c in args.chunks.split(",")]
    import torch

    report = measure(args, print)
    report["meta"] = {
        "shape": (
            f"Qwen3's vocabulary (151,936) on a {args.layers}-layer, 128-wide random Qwen3 body, B = {args.batch} "
            f"completions of T = {args.completion_length} tokens after one {args.prompt_tokens}-token prompt, float32"
        ),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "torch": torch.__version__,
        "reps": args.reps,
        "chunks": args.chunks,
    }
    out.write_text(json.dumps(report, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
