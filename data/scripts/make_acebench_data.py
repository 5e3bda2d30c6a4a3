"""Make data/acebench/: a few English rows of each of ACEBench's non-interactive categories, converted.

ACEBench (github.com/ACEBench/ACEBench, MIT licence) is not on the Hugging Face Hub; this reads a checkout of it
(`git clone https://github.com/ACEBench/ACEBench`) and writes `<out>/<category>.jsonl` in the schema of
`gear_trl.data.acebench` (prompt built with ACEBench's own English prompts, functions, ground truth, category,
dialogue), plus the ACEBench licence beside the rows. The local sample the tests and the docs use keeps the first 3
rows of each category (`--rows 3`, the default); `--rows 0` converts every row, the same rows the presets download.

    python data/scripts/make_acebench_data.py --acebench /path/to/ACEBench
    python data/scripts/make_acebench_data.py --acebench /path/to/ACEBench --rows 0 --out data/acebench_full
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

from gear_trl.data.acebench import NON_INTERACTIVE_CATEGORIES, convert_category, is_checkout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acebench", required=True, help="An ACEBench checkout.")
    parser.add_argument("--out", default="data/acebench")
    parser.add_argument("--rows", type=int, default=3, help="Rows per category (0: all).")
    args = parser.parse_args()
    if not is_checkout(args.acebench):
        parser.error(f"{args.acebench!r} has no data_all/data_en/: clone https://github.com/ACEBench/ACEBench")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for category in NON_INTERACTIVE_CATEGORIES:
        rows = convert_category(args.acebench, category, limit=args.rows or None)
        with open(out / f"{category}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        print(f"{category}: {len(rows)} rows")
    shutil.copyfile(Path(args.acebench) / "LICENSE.md", out / "LICENSE.md")
    try:
        commit = subprocess.run(
            ["git", "-C", args.acebench, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown (not a git checkout)"
    (out / "SOURCE").write_text(f"github.com/ACEBench/ACEBench at {commit}, {args.rows or 'all'} rows per category\n")


if __name__ == "__main__":
    main()
