"""Print the demo's before/after line from two `python -m gear_trl.evaluate` reports of the same split.

python recipes/tiny/demo_summary.py outputs/demo/eval_start.json outputs/demo/eval_end.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def summary(start: dict, end: dict) -> str:
    for key in ("dataset", "split", "n", "num_samples", "temperature", "seed", "limit"):
        a, b = (report.get(key, report.get("config", {}).get(key)) for report in (start, end))
        if a != b:  # the two figures are only comparable on the same problems, decoded the same way
            raise ValueError(f"The two reports differ in {key!r}: {a!r} and {b!r}.")
    temperature = start.get("config", {}).get("temperature", 0.0)
    decoding = "greedy" if not temperature else f"sampled (temperature {temperature:g})"
    what = f"{start['n']} {start['split']} problems of {start['dataset']}"
    if start.get("num_samples", 1) > 1:
        what += f" x {start['num_samples']} samples"
    return (
        f"held-out {decoding} accuracy ({what}): start {start['accuracy']:.3f} -> end {end['accuracy']:.3f} "
        f"({end['accuracy'] - start['accuracy']:+.3f})"
    )


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("start", help="evaluate report of the starting model (JSON)")
    parser.add_argument("end", help="evaluate report of the trained model (JSON)")
    args = parser.parse_args(argv)
    line = summary(*(json.loads(Path(path).read_text()) for path in (args.start, args.end)))
    print(line)
    return line


if __name__ == "__main__":
    main()
