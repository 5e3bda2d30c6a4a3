"""Write data/xlam_sample/train.jsonl: a small SYNTHETIC sample in the schema of Salesforce/xlam-function-calling-60k.

The real set is gated on the Hub (CC-BY-4.0) and cannot be downloaded offline, so the tests and the tiny recipes read
these rows instead: every row is generated here from hand-written tools and request templates (no row is taken from
xLAM, BFCL or any other dataset). Columns as in xLAM: `id` (int), `query` (str), `tools` and `answers` (JSON strings,
xLAM's tool format with Python-style types and `, optional`). The output is a pure function of `--seed`.

    python data/scripts/make_xlam_sample.py [--seed 7] [--rows 48] [--out data/xlam_sample/train.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

TOOLS = {
    "get_weather_forecast": {
        "description": "Daily weather forecast for a city.",
        "parameters": {
            "city": {"description": "City name, e.g. 'Lisbon'.", "type": "str", "default": ""},
            "days": {"description": "Number of days to forecast (1-10).", "type": "int, optional", "default": 3},
        },
    },
    "convert_currency": {
        "description": "Convert an amount of money from one currency to another at today's rate.",
        "parameters": {
            "amount": {"description": "The amount to convert.", "type": "float"},
            "from_currency": {"description": "ISO code of the source currency.", "type": "str"},
            "to_currency": {"description": "ISO code of the target currency.", "type": "str"},
        },
    },
    "is_prime": {
        "description": "Check whether an integer is a prime number.",
        "parameters": {"n": {"description": "The integer to check.", "type": "int"}},
    },
    "sort_numbers": {
        "description": "Sort a list of numbers.",
        "parameters": {
            "numbers": {"description": "The numbers to sort.", "type": "List[float]"},
            "descending": {
                "description": "Sort from largest to smallest.",
                "type": "bool, optional",
                "default": False,
            },
        },
    },
    "search_recipes": {
        "description": "Find cooking recipes that use an ingredient.",
        "parameters": {
            "ingredient": {"description": "Main ingredient.", "type": "str"},
            "max_results": {"description": "How many recipes to return.", "type": "int, optional", "default": 5},
        },
    },
    "stock_quote": {
        "description": "Latest trading price of a stock by its ticker symbol.",
        "parameters": {"symbol": {"description": "Ticker symbol, e.g. 'ACME'.", "type": "str"}},
    },
    "count_words": {
        "description": "Count the words in a piece of text.",
        "parameters": {"text": {"description": "The text.", "type": "str"}},
    },
    "book_lookup": {
        "description": "Look a book up by its ISBN.",
        "parameters": {"isbn": {"description": "ISBN-10 or ISBN-13.", "type": "str"}},
    },
}

CITIES = ["Lisbon", "Nairobi", "Osaka", "Quito", "Tallinn", "Perth", "Bergen", "Tucson"]
CURRENCIES = ["EUR", "USD", "JPY", "GBP", "CHF", "KES"]
INGREDIENTS = ["lentils", "spinach", "salmon", "chickpeas", "mushrooms", "tofu"]
SYMBOLS = ["ACME", "GLOBX", "INITK", "UMBR", "WAYN"]
SENTENCES = ["the quick fox rests", "a small boat drifts on the lake", "rain again today", "seven blue jars"]


def request(rng: random.Random) -> tuple[str, list[dict], list[str]]:
    """(query, reference calls, tools the calls use) for one templated request."""
    kind = rng.randrange(8)
    if kind == 0:
        city, days = rng.choice(CITIES), rng.randint(2, 7)
        return (
            f"What will the weather be like in {city} over the next {days} days?",
            [{"name": "get_weather_forecast", "arguments": {"city": city, "days": days}}],
            ["get_weather_forecast"],
        )
    if kind == 1:
        city = rng.choice(CITIES)
        return (
            f"Give me the forecast for {city}.",
            [{"name": "get_weather_forecast", "arguments": {"city": city}}],
            ["get_weather_forecast"],
        )
    if kind == 2:
        amount = round(rng.uniform(5, 900), 2)
        source, target = rng.sample(CURRENCIES, 2)
        return (
            f"How much is {amount} {source} in {target}?",
            [
                {
                    "name": "convert_currency",
                    "arguments": {"amount": amount, "from_currency": source, "to_currency": target},
                }
            ],
            ["convert_currency"],
        )
    if kind == 3:
        a, b = rng.sample(range(11, 500), 2)
        return (
            f"Are {a} and {b} prime numbers?",
            [{"name": "is_prime", "arguments": {"n": a}}, {"name": "is_prime", "arguments": {"n": b}}],
            ["is_prime"],
        )
    if kind == 4:
        numbers = [rng.randint(-50, 99) for _ in range(rng.randint(3, 6))]
        return (
            f"Sort these from largest to smallest: {', '.join(map(str, numbers))}.",
            [{"name": "sort_numbers", "arguments": {"numbers": numbers, "descending": True}}],
            ["sort_numbers"],
        )
    if kind == 5:
        ingredient, count = rng.choice(INGREDIENTS), rng.randint(2, 9)
        return (
            f"Find me {count} recipes with {ingredient}.",
            [{"name": "search_recipes", "arguments": {"ingredient": ingredient, "max_results": count}}],
            ["search_recipes"],
        )
    if kind == 6:
        first, second = rng.sample(SYMBOLS, 2)
        return (
            f"What are {first} and {second} trading at right now?",
            [
                {"name": "stock_quote", "arguments": {"symbol": first}},
                {"name": "stock_quote", "arguments": {"symbol": second}},
            ],
            ["stock_quote"],
        )
    text = rng.choice(SENTENCES)
    return (
        f"How many words are in '{text}'?",
        [{"name": "count_words", "arguments": {"text": text}}],
        ["count_words"],
    )


def make_rows(seed: int, rows: int) -> list[dict]:
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < rows:
        query, calls, used = request(rng)
        if query in seen:
            continue
        seen.add(query)
        # xLAM rows offer the tools the answer uses plus a few distractors, in a random order.
        others = [name for name in TOOLS if name not in used]
        names = used + rng.sample(others, rng.randint(0, 2))
        rng.shuffle(names)
        tools = [{"name": name, **TOOLS[name]} for name in names]
        out.append({"id": len(out), "query": query, "answers": json.dumps(calls), "tools": json.dumps(tools)})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rows", type=int, default=48)
    parser.add_argument("--out", default="data/xlam_sample/train.jsonl")
    args = parser.parse_args(argv)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        for row in make_rows(args.seed, args.rows):
            handle.write(json.dumps(row) + "\n")
    print(f"wrote {args.rows} rows to {path}")


if __name__ == "__main__":
    main()
