"""N consecutive two-rank runs of `gear_trl.train` on the tiny math recipe, counting the runs that fail.

    OMP_NUM_THREADS=1 nice -n 15 python bench/exit_loop.py --runs 100 --log bench/results/exit_loop/ddp.jsonl

Each run is as short as a real run can be (1 optimizer step, 8-token completions, no checkpoint; the final model is
saved), launched like a user launches it: `--launcher zero3` (default) is `accelerate launch` with DeepSpeed ZeRO-3
on two CPU processes over gloo, `--launcher ddp` is torchrun. A run fails when the launcher exits non-zero or its
output contains "terminate called" (the exit-time abort this loop watches for). One JSON line per run goes to `--log`
(appended, so a loop cut short keeps its count); the summary is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def command(launcher: str, out: str) -> list[str]:
    target = ["-m", "gear_trl.train", "--config", "recipes/tiny/config_math.yaml", "--output_dir", out]
    target += ["--max_steps", "1", "--save_strategy", "no", "--max_completion_length", "8"]
    if launcher == "ddp":
        return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                str(free_port()), *target]  # fmt: skip
    config = os.path.join(REPO, "tests", "distributed", "zero3_cpu.yaml")
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", config, "--main_process_port",
            str(free_port()), *target]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--launcher", choices=["zero3", "ddp"], default="zero3")
    parser.add_argument("--log", default=None, help="JSON lines, one per run (appended)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before a run counts as hung")
    args = parser.parse_args(argv)

    env = dict(os.environ, HF_HUB_OFFLINE="1", DS_ACCELERATOR="cpu", TRL_EXPERIMENTAL_SILENCE="1")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(tempfile.gettempdir(), "gear_exit_loop_extensions"))
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    failures, seconds = [], []
    for run in range(args.runs):
        out = tempfile.mkdtemp(prefix="gear_exit_loop_")
        start = time.monotonic()
        try:
            proc = subprocess.run(
                command(args.launcher, out),
                check=False,
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            status, text = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as err:
            status, text = "timeout", str(err.stdout or "") + str(err.stderr or "")
        elapsed = time.monotonic() - start
        saved = os.path.isfile(os.path.join(out, "model.safetensors"))
        aborted = "terminate called" in text
        failed = status != 0 or aborted or not saved
        seconds.append(elapsed)
        record = {"run": run, "status": status, "aborted": aborted, "saved": saved, "seconds": round(elapsed, 1)}
        if failed:
            failures.append(run)
            record["tail"] = text[-2000:]
        if args.log:
            with open(args.log, "a") as handle:
                handle.write(json.dumps(record) + "\n")
        print(
            f"run {run + 1}/{args.runs}: {'FAILED' if failed else 'ok'} (status {status}, {elapsed:.0f} s)", flush=True
        )
        shutil.rmtree(out, ignore_errors=True)
    median = sorted(seconds)[len(seconds) // 2] if seconds else 0.0
    print(
        f"{args.runs} two-rank runs ({args.launcher}): {len(failures)} failed {failures}; median {median:.0f} s a run"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
