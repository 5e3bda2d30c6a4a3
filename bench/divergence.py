"""Micro-benchmark of GEAR's divergence pass alone: `gear_trl.credit.reverse_kl_and_entropy`, old vs new, per chunk.

The pass applies the LM head to N positions' student and teacher hidden states a chunk of positions at a time and
returns the reverse KL and the student's entropy per position (divergence "full"). At the `vocab` shape of
bench/overhead.py it is most of what GEAR adds to a GRPO step (bench/results/overhead/NOTES.md). Two implementations:

    old   the pass as of 6ae3b6f (unchanged up to 293ea1e), copied below: per chunk, two fresh float32 log-softmax
          tensors (`logsumexp`, then in-place subtraction), pS = exp(log pS), row dots as `bmm`
    new   gear_trl.credit.reverse_kl_and_entropy as installed: one GEMM for student + teacher rows into reused
          buffers, each row shifted by its max, H = lse(zS) - <pS, zS>, KL = <pS, zS - zT> - lse(zS) + lse(zT)

Every (implementation, chunk) pair runs once per round on the same inputs, the order rotated each round, after a
warm-up round; the table shows the median over rounds (and the fastest). The extra peak memory of one call is taken
in a separate, untimed call, from the bytes allocated through glibc's malloc (`mallinfo2`, sampled at ~1 kHz by a
thread, so a short spike between samples can be missed). Precision: both implementations against a float64
reference on the first `--check-rows` positions, the max absolute error of KL and entropy.

    python -m bench.divergence            # V=151,936, H=128, N=2,048, chunks 16-256, 3 rounds (~4 min on 1 core)
    python -m bench.divergence --quick    # N=512, 2 rounds (~1 min)
    python -m bench.divergence --vocab 2264 --hidden 64 --positions 1024 --rounds 7 --tag tiny  # tiny model's head

Writes bench/results/divergence/cpu[_quick|_TAG].json (`--out` to put it elsewhere) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parent.parent

from gear_trl.credit import reverse_kl_and_entropy

RESULTS_DIR = REPO_ROOT / "bench" / "results" / "divergence"
CHUNKS = (16, 32, 64, 128, 256)


@torch.no_grad()
def old_reverse_kl_and_entropy(student_hidden, teacher_hidden, lm_head_weight, mask, *, temperature=1.0, chunk_size):
    """The "full" divergence as of 6ae3b6f (argument checks and the topk / sampled branches left out)."""
    batch, length, _ = student_hidden.shape
    mask = mask.to(dtype=torch.bool)
    student_rows, teacher_rows = student_hidden[mask], teacher_hidden[mask]
    kl_chunks, entropy_chunks = [], []
    for start in range(0, student_rows.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        log_ps = _old_log_probs(student_rows[rows], lm_head_weight, temperature)
        log_pt = _old_log_probs(teacher_rows[rows], lm_head_weight, temperature)
        ps = log_ps.exp()
        entropy_chunks.append(-_old_row_dot(ps, log_ps))
        kl = _old_row_dot(ps, log_pt.neg_().add_(log_ps))
        del log_ps, log_pt, ps
        kl_chunks.append(kl.clamp_min(0.0))
    kl_out = torch.zeros(batch, length)
    entropy_out = torch.zeros_like(kl_out)
    if kl_chunks:
        kl_out[mask] = torch.cat(kl_chunks)
        entropy_out[mask] = torch.cat(entropy_chunks)
    return kl_out, entropy_out


def _old_log_probs(hidden, weight, temperature):
    logits = torch.nn.functional.linear(hidden.to(weight.dtype), weight).float()
    if temperature != 1.0:
        logits.div_(temperature)
    return logits.sub_(logits.logsumexp(dim=-1, keepdim=True))


def _old_row_dot(a, b):
    return torch.bmm(a.unsqueeze(1), b.unsqueeze(2)).view(-1)


IMPLEMENTATIONS = {"old": old_reverse_kl_and_entropy, "new": reverse_kl_and_entropy}


def make_inputs(vocab: int, hidden: int, positions: int, seed: int = 0):
    """Random head and states with logits of realistic spread (|z| up to ~25, entropies ~1-5 nats) and a teacher
    close to the student, as one [1, N, H] row, every position masked in."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    student = 4.0 * torch.randn(1, positions, hidden, generator=generator)
    teacher = student + 0.5 * torch.randn(1, positions, hidden, generator=generator)
    mask = torch.ones(1, positions, dtype=torch.bool)
    return student, teacher, weight, mask


def reference(student, teacher, weight, temperature):
    """float64 KL and entropy per position, from materialized logits: for a few rows only."""
    log_ps = torch.log_softmax(student.double() @ weight.double().T / temperature, dim=-1)
    log_pt = torch.log_softmax(teacher.double() @ weight.double().T / temperature, dim=-1)
    ps = log_ps.exp()
    return (ps * (log_ps - log_pt)).sum(-1), -(ps * log_ps).sum(-1)


class PeakSampler:
    """Extra peak of the bytes allocated through glibc malloc (mallinfo2) over a window, sampled by a thread."""

    def __init__(self, interval: float = 1e-3):
        import ctypes
        import ctypes.util

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        names = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
        info_type = type("MallInfo2", (ctypes.Structure,), {"_fields_": [(n, ctypes.c_size_t) for n in names]})
        libc.mallinfo2.restype = info_type
        self._mallinfo = libc.mallinfo2
        self._interval = interval

    def read(self) -> int:
        info = self._mallinfo()
        return info.uordblks + info.hblkhd

    def measure(self, fn) -> int:
        start = self.read()
        peak = [start]
        stop = threading.Event()

        def run():
            while not stop.is_set():
                peak[0] = max(peak[0], self.read())
                time.sleep(self._interval)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            fn()
        finally:
            stop.set()
            thread.join()
        return max(peak[0], self.read()) - start


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--positions", type=int, default=None, help="N (default 2048; 512 with --quick)")
    parser.add_argument("--chunks", default=",".join(map(str, CHUNKS)), help="comma-separated chunk sizes")
    parser.add_argument("--impls", default="old,new", help=f"comma-separated, from {list(IMPLEMENTATIONS)}")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 3; 2 with --quick)")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (1: see bench/results/overhead/NOTES.md)"
    )
    parser.add_argument("--check-rows", type=int, default=16, help="positions compared with float64 (0: none)")
    parser.add_argument("--quick", action="store_true", help="N=512, 2 rounds")
    parser.add_argument("--tag", default=None, help="suffix of the output file (default: 'quick' with --quick)")
    parser.add_argument("--out", default=None, help="JSON path (default bench/results/divergence/cpu[_TAG].json)")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    positions = args.positions or (512 if args.quick else 2048)
    rounds = args.rounds or (2 if args.quick else 3)
    chunks = [int(c) for c in args.chunks.split(",")]
    impls = args.impls.split(",")
    student, teacher, weight, mask = make_inputs(args.vocab, args.hidden, positions)
    pairs = [(impl, chunk) for chunk in chunks for impl in impls]

    def call(impl, chunk):
        return IMPLEMENTATIONS[impl](student, teacher, weight, mask, temperature=args.temperature, chunk_size=chunk)

    precision = {}
    if args.check_rows:
        rows = min(args.check_rows, positions)
        ref_kl, ref_entropy = reference(student[0, :rows], teacher[0, :rows], weight, args.temperature)
        for impl in impls:
            kl, entropy = IMPLEMENTATIONS[impl](
                student[:, :rows],
                teacher[:, :rows],
                weight,
                mask[:, :rows],
                temperature=args.temperature,
                chunk_size=8,
            )
            precision[impl] = {
                "kl_max_abs_err": float((kl[0].double() - ref_kl).abs().max()),
                "entropy_max_abs_err": float((entropy[0].double() - ref_entropy).abs().max()),
            }
        precision["reference"] = {
            "rows": rows,
            "kl_range": [float(ref_kl.min()), float(ref_kl.max())],
            "entropy_range": [float(ref_entropy.min()), float(ref_entropy.max())],
        }

    sampler = PeakSampler()
    peaks = {f"{impl}/{chunk}": sampler.measure(lambda i=impl, c=chunk: call(i, c)) for impl, chunk in pairs}

    times = {f"{impl}/{chunk}": [] for impl, chunk in pairs}
    for round_index in range(rounds + 1):  # round 0 is the warm-up
        shift = round_index % len(pairs)
        for impl, chunk in pairs[shift:] + pairs[:shift]:
            begin = time.perf_counter()
            call(impl, chunk)
            elapsed = time.perf_counter() - begin
            if round_index:
                times[f"{impl}/{chunk}"].append(elapsed)
        print(f"round {round_index}/{rounds} done", file=sys.stderr, flush=True)

    results = {
        key: {
            "median_s": statistics.median(samples),
            "min_s": min(samples),
            "samples_s": samples,
            "extra_peak_mb": peaks[key] / 1e6,
        }
        for key, samples in times.items()
    }
    report = {
        "what": "reverse_kl_and_entropy alone (divergence full), old (6ae3b6f) vs new, per chunk size",
        "shape": {"vocab": args.vocab, "hidden": args.hidden, "positions": positions, "dtype": "float32"},
        "temperature": args.temperature,
        "rounds": rounds,
        "threads": args.threads,
        "machine": {
            "cpu": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "results": results,
        "precision_vs_float64": precision,
    }
    print(render(report, chunks, impls))
    tag = args.tag if args.tag is not None else ("quick" if args.quick else "")
    out = Path(args.out) if args.out else RESULTS_DIR / f"cpu{'_' + tag if tag else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")
    return report


def render(report: dict, chunks, impls) -> str:
    shape = report["shape"]
    lines = [
        (
            f"V={shape['vocab']:,}, H={shape['hidden']}, N={shape['positions']:,} positions, float32, "
            f"{report['threads']} thread(s), median of {report['rounds']} rounds (fastest), extra peak"
        ),
        "",
        "| chunk | "
        + " | ".join(f"{impl} time | {impl} extra peak" for impl in impls)
        + (" | new / old |" if {"old", "new"} <= set(impls) else " |"),
        "|---" * (1 + 2 * len(impls) + ({"old", "new"} <= set(impls))) + "|",
    ]
    results = report["results"]
    for chunk in chunks:
        cells = [str(chunk)]
        for impl in impls:
            r = results[f"{impl}/{chunk}"]
            cells += [f"{_seconds(r['median_s'])} ({_seconds(r['min_s'])})", f"{r['extra_peak_mb']:.0f} MB"]
        if {"old", "new"} <= set(impls):
            cells.append(f"{results[f'new/{chunk}']['median_s'] / results[f'old/{chunk}']['median_s']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    precision = report["precision_vs_float64"]
    if precision:
        ref = precision["reference"]
        lines += [
            "",
            f"max |error| vs float64 on {ref['rows']} positions (KL {ref['kl_range'][0]:.2g}..{ref['kl_range'][1]:.2g}, "
            f"entropy {ref['entropy_range'][0]:.2f}..{ref['entropy_range'][1]:.2f}): "
            + ", ".join(
                f"{impl} KL {precision[impl]['kl_max_abs_err']:.1e} / entropy {precision[impl]['entropy_max_abs_err']:.1e}"
                for impl in impls
            ),
        ]
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value >= 1 else f"{value * 1e3:.1f} ms"


if __name__ == "__main__":
    main()
