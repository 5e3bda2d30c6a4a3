r"""Generate the item-list task family under `data/item_lists/`.

K decisions per problem, K a parameter (`--ks`, default 4, 6 and 8): the prompt states K distinct short English nouns
(drawn from `WORDS`, our own list) and the answer writes them one a line, in order; the reward is binary, 1 only when
every line is right (`gear_trl.rewards.item_lists`). Two variants:

    copy       "Write these words one per line, in the same order: cat, river, lamp."   cat / river / lamp
    numbered   "Repeat this numbered list exactly:" / "1. cat" / "2. river" / "3. lamp"   1. cat / 2. river / 3. lamp

Outputs (a pure function of `--seed`; per variant and K the test split is drawn first, so `--n-train` does not change
it, and test problems never occur in train):

- `data/item_lists/<variant>/k<K>/{train,test}.jsonl`, in the `generic` schema plus labels: `{"prompt",
  "ground_truth": "cat,river,lamp" (the K items), "reference_solution": the K lines (numbered in `numbered`), "variant", "k", "items": [...],
  "decision_spans": [[start, end], ...] (each item's characters in `reference_solution`)}`. The variants draw
  from their own random streams, so adding one left `copy`'s rows as they were. The generic adapter keeps
  `prompt`, `ground_truth` and `reference_solution`; the labels are for readers, and the bench recomputes them from the
  prompt (`gear_trl.rewards.item_lists.item_list_problem`).

    python data/scripts/make_item_list_data.py
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from gear_trl.rewards.item_lists import VARIANTS, decision_spans, make_problem, question, reference_lines

_WORD_TEXT = """
    apple arm baby bag ball band bank bath bean bear bed bell bird boat body bone book boot bottle bowl box bread brick
    bridge brush bus cake camera candle car card cat chair cheese chest child circle clock cloud coat coin cow cup
    desk dog door dress drum duck eagle ear egg engine eye face farm fence field finger fire fish flag floor flower
    fork fox frog garden gate girl glass glove goat gold grape grass hair hammer hand hat heart hill horse house island
    jacket jar key kite knife lake lamp leaf leg lemon letter lion lock map market milk mirror money monkey moon mouse
    mouth nail neck needle nest net nose ocean onion orange owl page pan paper park pen pencil piano pig pillow pipe
    plane plant plate pocket potato queen rabbit radio rain ring river road rock roof rope salt sand school sea seed
    sheep shelf ship shirt shoe shop sink sister skirt snake snow sock spoon star stone street sugar sun table tail tea
    tent tiger toe tooth towel tower town toy train tree truck water wheel window wing winter wolf wood wool worm yard
    zebra
"""
WORDS = tuple(_WORD_TEXT.split())
"""Common lowercase English nouns of 3 to 7 letters, each its own item."""


def task_row(variant: str, items) -> dict:
    problem = make_problem(variant, items)
    return {
        "prompt": question(problem),
        "ground_truth": ",".join(problem.items),
        "reference_solution": reference_lines(problem),
        "variant": variant,
        "k": problem.k,
        "items": list(problem.items),
        "decision_spans": [list(span) for span in decision_spans(problem)],
    }


def draw(rng: random.Random, variant: str, k: int, n: int, seen: set) -> list[dict]:
    """`n` problems of K distinct words not in `seen` (which they join)."""
    rows = []
    while len(rows) < n:
        items = tuple(rng.sample(WORDS, k))
        if items not in seen:
            seen.add(items)
            rows.append(task_row(variant, items))
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def generate(seed: int, ks: list[int], n_train: int, n_test: int) -> dict:
    """Per (variant, K): its train and test rows."""
    if min(ks, default=1) < 1 or max(ks, default=1) > len(WORDS):
        raise ValueError(f"every K must be in [1, {len(WORDS)}]; got {ks}")
    out = {}
    for variant in VARIANTS:
        for k in ks:
            rng = random.Random(f"{seed}:{variant}:{k}")  # a (variant, K)'s rows do not depend on --ks
            seen: set = set()
            test = draw(rng, variant, k, n_test, seen)
            train = draw(rng, variant, k, n_train, seen)
            out[(variant, k)] = {"train": train, "test": test}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "data" / "item_lists")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--ks", type=int, nargs="+", default=[4, 6, 8])
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--n-test", type=int, default=200)
    args = parser.parse_args(argv)
    try:
        rows = generate(args.seed, args.ks, args.n_train, args.n_test)
    except ValueError as err:
        parser.error(str(err))
    for (variant, k), splits in rows.items():
        for split, split_rows in splits.items():
            write_jsonl(args.out_dir / variant / f"k{k}" / f"{split}.jsonl", split_rows)
    print(f"wrote {args.n_train} train and {args.n_test} test rows per variant and K {args.ks} to {args.out_dir}")


if __name__ == "__main__":
    main()
