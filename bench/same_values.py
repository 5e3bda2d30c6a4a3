"""Do two copies of gear_trl compute the same numbers, bit for bit? (issue 75 item 2: the cuts to GEAR's host-side
work must change no value.)

Each copy runs in a process of its own (`python -P`, the copy first on the path) and dumps:

    steps       two GEAR training steps on the bench's fixed batch (bench/host_cost.py's shape: Qwen3's vocabulary on a
                2-layer random body, B = 8 completions of one prompt, T = 96 tokens) per configuration: the divergence
                (KL, entropy, log-ratio), the advantages the loss reads, every `gear/` and reward metric and the loss,
                on the CPU path (divergence in the loss's LM head) and on the GPU path (`bench.host_cost.gpu_path`: a
                pass of its own, one `bmm` per row dot, the stacked copy to the host), at chunk 64 and 512, credit
                gear, gear-signed, rlsd and turn
    divergence  `reverse_kl_and_entropy` and `lm_head_statistics` over a grid: every divergence, chunk sizes 1-512,
                temperature, logit scale and soft-cap, bias, a teacher head of its own, float32 / bfloat16 heads,
                both row-dot branches, with and without the optional outputs

then the two dumps are compared with `torch.equal` (metrics as the bytes of their float64 values).

    mkdir /tmp/before && git archive <commit> gear_trl | tar -x -C /tmp/before
    python -m bench.same_values --before /tmp/before          # against this checkout's gear_trl

It prints one line per configuration and exits 1 if anything differs.
"""

from __future__ import annotations

import argparse
import itertools
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
STEP_CONFIGS = (
    ("gear", "gear"),
    ("gear", "gear-signed"),
    ("gear/gpu_path", "gear"),
    ("gear/gpu_path@512", "gear"),
    ("gear/gpu_path", "gear-signed"),
    ("gear/gpu_path", "rlsd"),
    ("gear/gpu_path", "turn"),
)


def _packed(values) -> list[bytes]:
    return [struct.pack("<d", v) for v in values]


def dump_steps() -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer

    from bench import host_cost
    from bench.overhead_measure import HostMonitor, StepRecorder
    from bench.overhead_run import fix_generation, make_trainer, run_step
    from bench.overhead_shapes import TINY_MODEL, build_model, build_rows, draw_completions

    out = {}
    for config, credit in STEP_CONFIGS:
        chunk = int(config.partition("@")[2] or 64)
        opts = argparse.Namespace(
            device="cpu", seed=0, num_iterations=1, divergence_chunk_size=chunk, sdpo_topk=20, batch=8,
            completion_length=96, layers=2,
        )  # fmt: skip
        shape = host_cost.make_shape(opts)
        tokenizer = AutoTokenizer.from_pretrained(TINY_MODEL)
        torch.manual_seed(0)
        model = build_model(shape, "cpu")
        rows = build_rows(shape, tokenizer)
        trainer, kind = make_trainer(
            f"gear/{credit}", model, tokenizer, Dataset.from_list(rows), shape, opts, tempfile.mkdtemp()
        )
        captured = []
        advantages = trainer._gear_advantages

        def capture(batch, divergence, mode, advantages=advantages, captured=captured):
            result = advantages(batch, divergence, mode)
            captured.append([result.clone()] + [None if t is None else t.clone() for t in divergence])
            return result

        trainer._gear_advantages = capture
        completions = {"ids": draw_completions(shape, model.config.vocab_size, tokenizer, 64, 0)}
        fix_generation(trainer, kind, completions)
        recorder = StepRecorder(HostMonitor(), lambda: None)
        losses = []
        with host_cost.gpu_path(config.startswith("gear/gpu_path")):
            for step in range(2):
                length = 64 if step == 0 else shape.length
                completions["ids"] = draw_completions(shape, model.config.vocab_size, tokenizer, length, step)
                losses.append(run_step(trainer, kind, rows, recorder, "cpu", seed=step))
        metrics = {k: _packed(v) for k, v in trainer._metrics["train"].items() if not k.startswith("perf/")}
        out[f"{config} credit {credit}"] = {"loss": _packed(losses), "tensors": captured, "metrics": metrics}
    return out


def dump_divergence() -> dict:
    import torch

    from gear_trl.credit import divergence as module

    out = {}
    g = torch.Generator().manual_seed(0)
    batch, length, width = 3, 37, 16
    for vocab in (300, 9000):
        student = torch.randn(batch, length + 2, width, generator=g)[:, 1:-1]  # strided, as completion_states gives
        teacher = student + 0.4 * torch.randn(batch, length, width, generator=g)
        weight = torch.randn(vocab, width, generator=g) * 0.5
        teacher_weight = weight + 0.05 * torch.randn(vocab, width, generator=g)
        bias = torch.randn(vocab, generator=g) * 0.1
        mask = torch.rand(batch, length, generator=g) > 0.25
        mask[1, :5] = False
        ids = torch.randint(0, vocab, (batch, length), generator=g)
        grid = itertools.product(
            (torch.float32, torch.bfloat16), ("full", "topk", "sampled", "sampled_signed"), (1, 5, 16, 64, 512),
            (1.0, 0.7), ((1.0, None), (0.5, 30.0)), (False, True), (False, True), (("cpu",), ()),
        )  # fmt: skip
        for dtype, divergence, chunk, temperature, (scale, cap), with_bias, own, dots in grid:
            if vocab == 9000 and (chunk < 16 or (temperature, scale, with_bias) != (0.7, 1.0, True)):
                continue  # the per-row BLAS dots: a smaller grid
            module._PER_ROW_DOT_DEVICES = dots
            w, b = weight.to(dtype), bias.to(dtype) if with_bias else None
            common = {
                "temperature": temperature, "chunk_size": chunk, "lm_head_bias": b, "divergence": divergence,
                "top_k": 7, "logit_scale": scale, "final_logit_softcapping": cap,
            }  # fmt: skip
            ratio = torch.full((batch, length), 7.0)
            agreement = torch.full((2, batch, length), 7.0) if divergence == "full" else None
            own_head = {"teacher_lm_head_weight": teacher_weight.to(dtype), "teacher_lm_head_bias": b} if own else {}
            kl, entropy = module.reverse_kl_and_entropy(
                student.to(dtype), teacher.to(dtype), w, mask, token_ids=ids, log_ratio_out=ratio,
                agreement_out=agreement, **own_head, **common,
            )  # fmt: skip
            key = f"V {vocab} {dtype} {divergence} chunk {chunk} tau {temperature} scale {scale} cap {cap} "
            key += f"bias {with_bias} own head {own} row dots {dots or 'bmm'}"
            out[key] = [kl, entropy, ratio] + ([agreement] if agreement is not None else [])
            out[key + " plain"] = list(
                module.reverse_kl_and_entropy(student.to(dtype), teacher.to(dtype), w, mask, **common, token_ids=ids)
            )
            rows_s, rows_t, targets = student.to(dtype)[mask], teacher.to(dtype)[mask], ids[mask]
            paired = module.lm_head_statistics(
                rows_s.clone(), w, teacher_rows=rows_t, targets=targets, log_ratio=True,
                agreement=divergence == "full", **common,
            )  # fmt: skip
            out[key + " rows, paired"] = list(paired)
            out[key + " rows, alone"] = list(module.lm_head_statistics(rows_s.clone(), w, targets=targets, **common))
    return out


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def compare(before: dict, after: dict, log) -> int:
    differ = 0
    for part in ("steps", "divergence"):
        keys = sorted(set(before[part]) | set(after[part]))
        same = [k for k in keys if k in before[part] and k in after[part] and _same(before[part][k], after[part][k])]
        differ += len(keys) - len(same)
        if part == "steps":
            for key in keys:
                log(f"{key}: {'same' if key in same else 'DIFFERENT'}")
        else:
            log(f"divergence grid: {len(same)} of {len(keys)} configurations the same")
            for key in sorted(set(keys) - set(same))[:10]:
                log(f"  DIFFERENT: {key}")
    return differ


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a directory holding the other copy's gear_trl/")
    parser.add_argument("--after", default=str(REPO_ROOT), help="default: this checkout")
    parser.add_argument("--dump", help=argparse.SUPPRESS)  # the child: write this process's dump there
    args = parser.parse_args(argv)
    if args.dump:
        import torch

        import gear_trl

        torch.set_num_threads(1)
        source = str(Path(gear_trl.__file__).parent)
        torch.save({"gear_trl": source, "steps": dump_steps(), "divergence": dump_divergence()}, args.dump)
        return 0
    import torch

    dumps = {}
    with tempfile.TemporaryDirectory() as folder:
        for label, source in (("before", args.before), ("after", args.after)):
            path = Path(folder) / f"{label}.pt"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, str(REPO_ROOT)]), "HF_HUB_OFFLINE": "1"}
            command = [sys.executable, "-P", "-m", "bench.same_values", "--before", args.before, "--dump", str(path)]
            subprocess.run(command, env=env, cwd=REPO_ROOT, check=True)
            dumps[label] = torch.load(path, weights_only=False)
            print(f"{label}: {dumps[label]['gear_trl']}")
    return 1 if compare(dumps["before"], dumps["after"], print) else 0


if __name__ == "__main__":
    sys.exit(main())
