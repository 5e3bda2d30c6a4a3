"""Run the fuzz properties of tests/envs/test_fuzz.py with many more cases than CI does, and print how many ran.

    OMP_NUM_THREADS=1 python -m bench.fuzz --examples 2000

Each property gets `--examples` cases (the rollout loop a fifth of them), drawn at random (not the fixed CI draw).
Prints hypothesis' per-property statistics and a total; exits non-zero when a property fails.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000, help="cases per property (rollout loop: a fifth)")
    args = parser.parse_args(argv)
    env = dict(os.environ, GEAR_FUZZ_EXAMPLES=str(args.examples), GEAR_FUZZ_RANDOM="1", TRL_EXPERIMENTAL_SILENCE="1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/envs/test_fuzz.py"]
    command += ["--hypothesis-show-statistics"]
    result = subprocess.run(command, check=False, env=env, capture_output=True, text=True)
    print(result.stdout[-20000:], result.stderr[-5000:], sep="\n")
    passing = [int(n) for n in re.findall(r"(\d+) passing, \d+ failing", result.stdout)]
    failing = [int(n) for n in re.findall(r"\d+ passing, (\d+) failing", result.stdout)]
    print(f"fuzz cases: {sum(passing)} passing, {sum(failing)} failing over {len(passing)} properties")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
