"""bf16 on CPU: why the recipes' `dtype: bfloat16` is switched to float32 on a CPU run.

Reduced to plain PyTorch: transformers' causal LMs project `hidden[:, -1:]` (a non-contiguous slice) through the LM
head at every generation step, and PEFT freezes the head's weight. A bf16 `F.linear` with a frozen weight on a
non-contiguous input takes oneDNN's slow path on CPU; the same call with oneDNN off, on a contiguous input, or in
float32 does not. Each case runs in a fresh process (its peak RSS is its own), one torch thread, and is stopped at
`--timeout` seconds.

    python -m bench.cpu_bf16                    # H=2,560 (Qwen3-4B), V=32,768; ~1 min
    python -m bench.cpu_bf16 --vocab 151936     # Qwen3's vocabulary (the slow case runs into the timeout)

Prints a table: seconds per call (median of `--reps`), peak RSS of the process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CASES = {
    "bf16, frozen weight, hidden[:, -1:] (what generation does)": {"dtype": "bfloat16", "contiguous": False},
    "bf16, same, oneDNN off": {"dtype": "bfloat16", "contiguous": False, "mkldnn": False},
    "bf16, same, contiguous input": {"dtype": "bfloat16", "contiguous": True},
    "bf16, weight requires grad": {"dtype": "bfloat16", "contiguous": False, "requires_grad": True},
    "float32 weights, bf16 autocast (--bf16 true --dtype float32)": {
        "dtype": "float32",
        "contiguous": False,
        "autocast": True,
    },
    "float32 (--dtype float32 --bf16 false)": {"dtype": "float32", "contiguous": False},
}


def run_case(case: dict, hidden: int, vocab: int, batch: int, length: int, reps: int) -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dtype = getattr(torch, case["dtype"])
    weight = (torch.randn(vocab, hidden) * 0.02).to(dtype).requires_grad_(case.get("requires_grad", False))
    states = torch.randn(batch, length, hidden).to(dtype)
    times = []
    for _ in range(reps):
        x = states[:, -1:]
        if case["contiguous"]:
            x = x.contiguous()
        start = time.perf_counter()
        with (
            torch.no_grad(),
            torch.backends.mkldnn.flags(enabled=case.get("mkldnn", True)),
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=case.get("autocast", False)),
        ):
            F.linear(x, weight)
        times.append(time.perf_counter() - start)
    times.sort()
    return {
        "seconds": times[len(times) // 2],
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=2560)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one case, in a child process
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(CASES[args.case], args.hidden, args.vocab, args.batch, args.length, args.reps)))
        return
    import torch

    print(
        f"torch {torch.__version__}, H={args.hidden}, V={args.vocab}, input [{args.batch}, {args.length}, H][:, -1:]"
    )
    print("| case | s per call | peak RSS |\n|---|---|---|")
    for name in CASES:
        command = [sys.executable, __file__, "--case", name, *(sys.argv[1:] if argv is None else argv)]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        try:
            done = subprocess.run(command, check=True, capture_output=True, text=True, timeout=args.timeout, env=env)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"| {name} | {result['seconds']:.3g} | {result['peak_rss_gb']:.2f} GB |", flush=True)
        except subprocess.TimeoutExpired:
            print(f"| {name} | did not finish in {args.timeout:.0f} s | - |", flush=True)


if __name__ == "__main__":
    main()
