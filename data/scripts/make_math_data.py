"""Generate the synthetic math datasets under `data/math/`.

Three small datasets, each with a `train.jsonl` and a `test.jsonl` split, in the formats of the public benchmarks
they stand in for (the problems themselves are generated from templates, nothing is copied):

- `gsm8k_style/`: `{"question", "answer"}`, the answer a short worked solution ending in `#### <number>`.
- `math_style/`: `{"problem", "solution"}`, the solution a worked solution with the final answer in `\\boxed{...}`.
- `generic/`: `{"prompt", "ground_truth"}`, short arithmetic questions with the answer as a number string.

Problems are short (questions under about 40 words) because the models trained on them in tests are tiny. The
output is a pure function of `--seed`: rerunning the script rewrites identical files.

    python data/scripts/make_math_data.py
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from fractions import Fraction
from math import gcd
from pathlib import Path

Row = dict[str, str]
Template = Callable[[random.Random], Row]

# ---------------------------------------------------------------------------------------------------------------------
# Vocabulary for word problems
# ---------------------------------------------------------------------------------------------------------------------

PEOPLE = [
    ("Ava", "she"), ("Ben", "he"), ("Chloe", "she"), ("Diego", "he"), ("Emma", "she"), ("Farah", "she"),
    ("Gabe", "he"), ("Hana", "she"), ("Ivan", "he"), ("Jade", "she"), ("Kofi", "he"), ("Lena", "she"),
    ("Mia", "she"), ("Noah", "he"), ("Omar", "he"), ("Priya", "she"), ("Quinn", "they"), ("Ravi", "he"),
    ("Sara", "she"), ("Tom", "he"), ("Uma", "she"), ("Victor", "he"), ("Wen", "she"), ("Yusuf", "he"),
    ("Zoe", "she"),
]  # fmt: skip
SHOP_ITEMS = ["pencils", "notebooks", "apples", "cookies", "stickers", "markers", "oranges", "cupcakes", "pens",
              "bottles of juice", "comic books", "tennis balls"]  # fmt: skip
SNACKS = ["cookies", "grapes", "crackers", "strawberries", "candies", "almonds", "pretzels", "cherries"]
BAKED = ["muffins", "rolls", "cupcakes", "bagels", "croissants", "biscuits"]
VEHICLES = ["car", "bus", "train", "truck", "cyclist", "boat"]
CLOTHES = ["jacket", "pair of shoes", "backpack", "sweater", "lamp", "board game", "helmet"]
TREES = ["apple", "pear", "lemon", "peach", "plum", "orange"]


def _person(rng: random.Random) -> tuple[str, str]:
    return rng.choice(PEOPLE)


def _two_people(rng: random.Random) -> tuple[tuple[str, str], tuple[str, str]]:
    first, second = rng.sample(PEOPLE, 2)
    return first, second


def _verb(pronoun: str, singular: str, plural: str) -> str:
    return plural if pronoun == "they" else singular


def _gsm8k_row(question: str, steps: list[str], answer: int) -> Row:
    # GSM8K writes large final answers with thousands separators now and then; keep that so extraction is exercised.
    final = f"{answer:,}" if answer >= 1000 else str(answer)
    return {"question": question, "answer": "\n".join(steps + [f"#### {final}"])}


# ---------------------------------------------------------------------------------------------------------------------
# GSM8K-style templates
# ---------------------------------------------------------------------------------------------------------------------


def gsm_change(rng: random.Random) -> Row:
    (name, _), item = _person(rng), rng.choice(SHOP_ITEMS)
    n, price = rng.randint(2, 9), rng.randint(1, 9)
    cost = n * price
    bill = next(b for b in (10, 20, 50, 100) if b > cost)
    question = (
        f"{name} buys {n} {item} at ${price} each and pays with a ${bill} bill. How much change does {name} get?"
    )
    steps = [
        f"The {item} cost {n} * {price} = {cost} dollars.",
        f"The change is {bill} - {cost} = {bill - cost} dollars.",
    ]
    return _gsm8k_row(question, steps, bill - cost)


def gsm_two_items(rng: random.Random) -> Row:
    (name, pronoun), (item1, item2) = _person(rng), rng.sample(SHOP_ITEMS, 2)
    a, p1, b, p2 = rng.randint(2, 8), rng.randint(1, 12), rng.randint(2, 8), rng.randint(1, 12)
    question = (
        f"{name} buys {a} {item1} for ${p1} each and {b} {item2} for ${p2} each. "
        f"How much {_verb(pronoun, 'does', 'do')} {pronoun} spend in total?"
    )
    steps = [
        f"The {item1} cost {a} * {p1} = {a * p1} dollars.",
        f"The {item2} cost {b} * {p2} = {b * p2} dollars.",
        f"In total {name} spends {a * p1} + {b * p2} = {a * p1 + b * p2} dollars.",
    ]
    return _gsm8k_row(question, steps, a * p1 + b * p2)


def gsm_distance(rng: random.Random) -> Row:
    vehicle = rng.choice(VEHICLES)
    s1, h1, s2, h2 = rng.randint(3, 12) * 5, rng.randint(1, 5), rng.randint(3, 12) * 5, rng.randint(1, 4)
    question = (
        f"A {vehicle} travels at {s1} km per hour for {h1} hours, then at {s2} km per hour for {h2} hours. "
        f"How many kilometers does it travel in total?"
    )
    steps = [
        f"First part: {s1} * {h1} = {s1 * h1} km.",
        f"Second part: {s2} * {h2} = {s2 * h2} km.",
        f"Total distance: {s1 * h1} + {s2 * h2} = {s1 * h1 + s2 * h2} km.",
    ]
    return _gsm8k_row(question, steps, s1 * h1 + s2 * h2)


def gsm_age_times(rng: random.Random) -> Row:
    (n1, _), (n2, _) = _two_people(rng)
    age, k, years = rng.randint(3, 15), rng.randint(2, 4), rng.randint(2, 10)
    question = f"{n1} is {age} years old. {n2} is {k} times as old as {n1}. How old will {n2} be in {years} years?"
    steps = [
        f"{n2} is {k} * {age} = {k * age} years old now.",
        f"In {years} years {n2} will be {k * age} + {years} = {k * age + years}.",
    ]
    return _gsm8k_row(question, steps, k * age + years)


def gsm_age_sum(rng: random.Random) -> Row:
    (n1, _), (n2, _) = _two_people(rng)
    age, diff = rng.randint(5, 40), rng.randint(2, 30)
    question = f"{n1} is {diff} years older than {n2}. If {n2} is {age} years old, what is the sum of their ages?"
    steps = [
        f"{n1} is {age} + {diff} = {age + diff} years old.",
        f"The sum of their ages is {age + diff} + {age} = {2 * age + diff}.",
    ]
    return _gsm8k_row(question, steps, 2 * age + diff)


def gsm_sharing(rng: random.Random) -> Row:
    (name, _), snack = _person(rng), rng.choice(SNACKS)
    friends, each = rng.randint(2, 8), rng.randint(3, 12)
    eaten = rng.randint(1, each - 1)
    total = friends * each
    question = (
        f"{name} shares {total} {snack} equally among {friends} friends. Each friend eats {eaten} of them. "
        f"How many {snack} does each friend have left?"
    )
    steps = [
        f"Each friend gets {total} / {friends} = {each} {snack}.",
        f"After eating, each has {each} - {eaten} = {each - eaten} left.",
    ]
    return _gsm8k_row(question, steps, each - eaten)


def gsm_bakery(rng: random.Random) -> Row:
    baked = rng.choice(BAKED)
    trays, per_tray = rng.randint(2, 9), rng.randint(4, 12)
    made = trays * per_tray
    sold = rng.randint(1, made - 1)
    question = (
        f"A bakery makes {trays} trays of {baked} with {per_tray} on each tray. It sells {sold} {baked}. "
        f"How many are left?"
    )
    steps = [
        f"The bakery makes {trays} * {per_tray} = {made} {baked}.",
        f"After selling, {made} - {sold} = {made - sold} are left.",
    ]
    return _gsm8k_row(question, steps, made - sold)


def gsm_savings(rng: random.Random) -> Row:
    name, _ = _person(rng)
    weekly, weeks = rng.randint(3, 25), rng.randint(2, 12)
    saved = weekly * weeks
    spent = rng.randint(1, saved - 1)
    question = (
        f"{name} saves ${weekly} every week for {weeks} weeks, then spends ${spent} on a gift. "
        f"How many dollars are left?"
    )
    steps = [
        f"{name} saves {weekly} * {weeks} = {saved} dollars.",
        f"After the gift, {saved} - {spent} = {saved - spent} dollars are left.",
    ]
    return _gsm8k_row(question, steps, saved - spent)


def gsm_reading(rng: random.Random) -> Row:
    name, _ = _person(rng)
    per_day, days = rng.randint(5, 40), rng.randint(3, 15)
    pages = per_day * days
    question = f"{name} reads {per_day} pages a day. How many days does it take {name} to read a {pages}-page book?"
    steps = [f"It takes {pages} / {per_day} = {days} days."]
    return _gsm8k_row(question, steps, days)


def gsm_discount(rng: random.Random) -> Row:
    thing = rng.choice(CLOTHES)
    pct = rng.choice([10, 20, 25, 50])
    price = rng.randint(2, 12) * 20
    off = price * pct // 100
    question = f"A {thing} costs ${price}. It is on sale for {pct}% off. What is the sale price in dollars?"
    steps = [
        f"The discount is {pct}% of {price}, which is {off} dollars.",
        f"The sale price is {price} - {off} = {price - off} dollars.",
    ]
    return _gsm8k_row(question, steps, price - off)


def gsm_orchard(rng: random.Random) -> Row:
    tree = rng.choice(TREES)
    rows, per_row, fruit = rng.randint(4, 15), rng.randint(5, 20), rng.randint(6, 30)
    trees = rows * per_row
    question = (
        f"An orchard has {rows} rows of {per_row} {tree} trees. Each tree gives {fruit} fruits. "
        f"How many fruits does the orchard give in total?"
    )
    steps = [
        f"There are {rows} * {per_row} = {trees} trees.",
        f"They give {trees} * {fruit} = {trees * fruit} fruits.",
    ]
    return _gsm8k_row(question, steps, trees * fruit)


def gsm_class_groups(rng: random.Random) -> Row:
    boys, girls, size = rng.randint(5, 20), rng.randint(5, 20), rng.choice([2, 3, 4, 5])
    total = boys + girls
    extra = (-total) % size
    boys += extra
    total = boys + girls
    question = (
        f"A class has {boys} boys and {girls} girls. The teacher splits them into groups of {size}. "
        f"How many groups are there?"
    )
    steps = [
        f"There are {boys} + {girls} = {total} students.",
        f"That makes {total} / {size} = {total // size} groups.",
    ]
    return _gsm8k_row(question, steps, total // size)


GSM8K_TEMPLATES: list[Template] = [
    gsm_change, gsm_two_items, gsm_distance, gsm_age_times, gsm_age_sum, gsm_sharing, gsm_bakery, gsm_savings,
    gsm_reading, gsm_discount, gsm_orchard, gsm_class_groups,
]  # fmt: skip

# ---------------------------------------------------------------------------------------------------------------------
# MATH-style templates
# ---------------------------------------------------------------------------------------------------------------------


def latex_number(value: Fraction | int) -> str:
    """LaTeX for a rational: `7`, `-3`, `\\frac{3}{4}`, `-\\frac{5}{2}`."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _signed_term(coefficient: int, text: str = "") -> str:
    """` + 3x` / ` - 3x` for the second and later terms of a sum."""
    sign = "-" if coefficient < 0 else "+"
    magnitude = abs(coefficient)
    shown = "" if (text and magnitude == 1) else str(magnitude)
    return f" {sign} {shown}{text}"


def _linear(a: int, b: int, var: str = "x") -> str:
    """`ax + b` as LaTeX, dropping zero and unit coefficients."""
    if a == 0:
        return str(b)
    head = {1: var, -1: f"-{var}"}.get(a, f"{a}{var}")
    return head if b == 0 else head + _signed_term(b)


def math_linear_equation(rng: random.Random) -> Row:
    a, b = rng.randint(2, 9), rng.choice([n for n in range(-15, 16) if n != 0])
    c = rng.randint(-20, 30)
    x = Fraction(c - b, a)
    problem = f"Solve for $x$: ${_linear(a, b)} = {c}$."
    move = f"Subtract {b} from" if b > 0 else f"Add {-b} to"
    solution = (
        f"{move} both sides to get ${a}x = {c - b}$. Dividing by {a} gives $x = {latex_number(x)}$. "
        f"The answer is $\\boxed{{{latex_number(x)}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_fraction_sum(rng: random.Random) -> Row:
    b, d = rng.randint(2, 9), rng.randint(2, 9)
    a, c = rng.randint(1, b - 1), rng.randint(1, 9)
    op = rng.choice(["+", "-"])
    result = Fraction(a, b) + Fraction(c, d) if op == "+" else Fraction(a, b) - Fraction(c, d)
    common = b * d // gcd(b, d)
    left, right = a * common // b, c * common // d
    combined = left + right if op == "+" else left - right
    problem = f"Compute $\\frac{{{a}}}{{{b}}} {op} \\frac{{{c}}}{{{d}}}$. Express your answer as a common fraction."
    solution = (
        f"Over the common denominator {common}: "
        f"$\\frac{{{left}}}{{{common}}} {op} \\frac{{{right}}}{{{common}}} = \\frac{{{combined}}}{{{common}}}$, "
        f"which simplifies to $\\boxed{{{latex_number(result)}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_fraction_product(rng: random.Random) -> Row:
    a, b, c, d = rng.randint(1, 9), rng.randint(2, 12), rng.randint(1, 9), rng.randint(2, 12)
    result = Fraction(a, b) * Fraction(c, d)
    problem = f"What is $\\frac{{{a}}}{{{b}}} \\cdot \\frac{{{c}}}{{{d}}}$? Simplify your answer."
    solution = (
        f"Multiply numerators and denominators: "
        f"$\\frac{{{a} \\cdot {c}}}{{{b} \\cdot {d}}} = \\frac{{{a * c}}}{{{b * d}}}$. "
        f"In lowest terms this is $\\boxed{{{latex_number(result)}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_evaluate_quadratic(rng: random.Random) -> Row:
    a, b, c, x = rng.randint(1, 5), rng.randint(-9, 9), rng.randint(-9, 9), rng.randint(-4, 6)
    value = a * x * x + b * x + c
    expr = (f"{a}x^2" if a != 1 else "x^2") + (_signed_term(b, "x") if b else "") + (_signed_term(c) if c else "")
    problem = f"Evaluate ${expr}$ when $x = {x}$."
    solution = (
        f"Substituting $x = {x}$: ${a}({x})^2 + ({b})({x}) + ({c}) = {a * x * x} + ({b * x}) + ({c}) = {value}$. "
        f"So the value is $\\boxed{{{value}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_simplify(rng: random.Random) -> Row:
    a, b, c = rng.randint(2, 9), rng.randint(1, 9), rng.randint(1, 9)
    while c == a:
        c = rng.randint(1, 9)
    answer = _linear(a - c, a * b)
    cx = "x" if c == 1 else f"{c}x"
    problem = f"Simplify ${a}(x + {b}) - {cx}$."
    solution = (
        f"Distribute: ${a}(x + {b}) = {a}x + {a * b}$. Then ${a}x + {a * b} - {cx} = {answer}$. "
        f"The simplified expression is $\\boxed{{{answer}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_powers(rng: random.Random) -> Row:
    a, m, b, n = rng.randint(2, 5), rng.randint(2, 5), rng.randint(2, 9), rng.randint(2, 3)
    op = rng.choice(["+", "-"])
    value = a**m + b**n if op == "+" else a**m - b**n
    problem = f"Compute ${a}^{m} {op} {b}^{n}$."
    solution = (
        f"We have ${a}^{m} = {a**m}$ and ${b}^{n} = {b**n}$, "
        f"so the result is ${a**m} {op} {b**n} = \\boxed{{{value}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_gcd_lcm(rng: random.Random) -> Row:
    k = rng.randint(2, 12)
    p, q = rng.sample(range(1, 13), 2)
    m, n = k * p, k * q
    if rng.random() < 0.5:
        value, what = gcd(m, n), "greatest common divisor"
        reason = (
            f"Both numbers are multiples of {gcd(m, n)}, "
            f"and $\\frac{{{m}}}{{{gcd(m, n)}}}$ and $\\frac{{{n}}}{{{gcd(m, n)}}}$ share no factor."
        )
    else:
        value, what = m * n // gcd(m, n), "least common multiple"
        reason = (
            f"The greatest common divisor is {gcd(m, n)}, "
            f"so the least common multiple is $\\frac{{{m} \\cdot {n}}}{{{gcd(m, n)}}} = {value}$."
        )
    problem = f"What is the {what} of {m} and {n}?"
    return {"problem": problem, "solution": f"{reason} The answer is $\\boxed{{{value}}}$."}


def math_mean(rng: random.Random) -> Row:
    values = [rng.randint(1, 30) for _ in range(rng.randint(3, 5))]
    mean = Fraction(sum(values), len(values))
    listed = ", ".join(map(str, values[:-1])) + f" and {values[-1]}"
    problem = f"What is the arithmetic mean of {listed}? Express your answer as a common fraction if needed."
    solution = (
        f"The sum is ${' + '.join(map(str, values))} = {sum(values)}$ and there are {len(values)} numbers, "
        f"so the mean is $\\frac{{{sum(values)}}}{{{len(values)}}} = \\boxed{{{latex_number(mean)}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_slope(rng: random.Random) -> Row:
    x1, y1 = rng.randint(-6, 6), rng.randint(-6, 6)
    x2, y2 = x1 + rng.randint(1, 6), rng.randint(-9, 9)
    slope = Fraction(y2 - y1, x2 - x1)
    problem = f"What is the slope of the line through $({x1}, {y1})$ and $({x2}, {y2})$?"
    solution = (
        f"The slope is $\\frac{{{y2} - ({y1})}}{{{x2} - ({x1})}} = \\frac{{{y2 - y1}}}{{{x2 - x1}}}$, "
        f"which is $\\boxed{{{latex_number(slope)}}}$."
    )
    return {"problem": problem, "solution": solution}


def math_system(rng: random.Random) -> Row:
    x, y = rng.randint(-9, 12), rng.randint(-9, 12)
    s, d = x + y, x - y
    ask_x = rng.random() < 0.5
    problem = f"If $x + y = {s}$ and $x - y = {d}$, what is the value of ${'x' if ask_x else 'y'}$?"
    if ask_x:
        solution = f"Adding the equations gives $2x = {s + d}$, so $x = \\boxed{{{x}}}$."
    else:
        solution = f"Subtracting the equations gives $2y = {s - d}$, so $y = \\boxed{{{y}}}$."
    return {"problem": problem, "solution": solution}


def math_percent(rng: random.Random) -> Row:
    pct = rng.choice([5, 10, 15, 20, 25, 30, 40, 50, 75])
    n = rng.randint(1, 20) * 20
    value = Fraction(pct * n, 100)
    problem = f"What is ${pct}\\%$ of ${n}$?"
    solution = f"${pct}\\%$ of ${n}$ is $\\frac{{{pct}}}{{100}} \\cdot {n} = \\boxed{{{latex_number(value)}}}$."
    return {"problem": problem, "solution": solution}


MATH_TEMPLATES: list[Template] = [
    math_linear_equation, math_fraction_sum, math_fraction_product, math_evaluate_quadratic, math_simplify,
    math_powers, math_gcd_lcm, math_mean, math_slope, math_system, math_percent,
]  # fmt: skip

# ---------------------------------------------------------------------------------------------------------------------
# Generic arithmetic templates
# ---------------------------------------------------------------------------------------------------------------------


def _number_string(value: Fraction | int) -> str:
    """A terminating rational as a plain decimal string: `12`, `-4`, `3.5`, `0.25`."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    text = f"{float(value):.6f}".rstrip("0").rstrip(".")
    assert Fraction(text) == value, value
    return text


def generic_binary(rng: random.Random) -> Row:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    op, word = rng.choice([("+", "plus"), ("-", "minus"), ("*", "times")])
    value = {"+": a + b, "-": a - b, "*": a * b}[op]
    prompt = rng.choice([f"What is {a} {op} {b}?", f"What is {a} {word} {b}?", f"Compute {a} {op} {b}."])
    return {"prompt": prompt, "ground_truth": _number_string(value)}


def generic_division(rng: random.Random) -> Row:
    b = rng.choice([2, 4, 5, 8, 10])
    a = rng.randint(2, 60)
    prompt = rng.choice([f"What is {a} divided by {b}?", f"Compute {a} / {b}."])
    return {"prompt": prompt, "ground_truth": _number_string(Fraction(a, b))}


def generic_precedence(rng: random.Random) -> Row:
    a, b, c = rng.randint(1, 20), rng.randint(2, 12), rng.randint(2, 12)
    if rng.random() < 0.5:
        prompt, value = f"Compute {a} + {b} * {c}.", a + b * c
    else:
        prompt, value = f"What is ({a} + {b}) * {c}?", (a + b) * c
    return {"prompt": prompt, "ground_truth": _number_string(value)}


def generic_square(rng: random.Random) -> Row:
    n, power = rng.randint(2, 30), rng.choice([2, 2, 3])
    if power == 3:
        n = n % 10 + 2
        return {"prompt": f"What is {n} cubed?", "ground_truth": str(n**3)}
    prompt = rng.choice([f"What is the square of {n}?", f"What is {n} squared?"])
    return {"prompt": prompt, "ground_truth": str(n * n)}


def generic_remainder(rng: random.Random) -> Row:
    a, b = rng.randint(10, 200), rng.randint(3, 12)
    return {"prompt": f"What is the remainder when {a} is divided by {b}?", "ground_truth": str(a % b)}


def generic_chain(rng: random.Random) -> Row:
    a, b, c = rng.randint(10, 90), rng.randint(1, 40), rng.randint(1, 40)
    return {
        "prompt": f"Start with {a}, add {b}, then subtract {c}. What number do you get?",
        "ground_truth": str(a + b - c),
    }


GENERIC_TEMPLATES: list[Template] = [
    generic_binary, generic_division, generic_precedence, generic_square, generic_remainder, generic_chain,
]  # fmt: skip

DATASETS: dict[str, tuple[list[Template], str]] = {
    # name: (templates, the column whose text must be unique across both splits)
    "gsm8k_style": (GSM8K_TEMPLATES, "question"),
    "math_style": (MATH_TEMPLATES, "problem"),
    "generic": (GENERIC_TEMPLATES, "prompt"),
}


def generate_rows(templates: list[Template], key: str, n: int, rng: random.Random, seen: set[str]) -> list[Row]:
    """`n` rows whose `row[key]` is not in `seen` (updated in place), shuffled. Templates take turns, so each is about
    equally represented unless it runs out of distinct problems."""
    rows, attempts = [], 0
    while len(rows) < n:
        attempts += 1
        if attempts > 100 * n:
            raise RuntimeError(f"could not generate {n} distinct rows; templates too narrow")
        row = templates[attempts % len(templates)](rng)
        if row[key] not in seen:
            seen.add(row[key])
            rows.append(row)
    rng.shuffle(rows)
    return rows


def write_jsonl(path: Path, rows: list[Row]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parents[1] / "math")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--n-train", type=int, default=400)
    parser.add_argument("--n-test", type=int, default=100)
    args = parser.parse_args(argv)

    for offset, (name, (templates, key)) in enumerate(DATASETS.items()):
        rng, seen = random.Random(args.seed + offset), set()
        # Test first, so that changing --n-train leaves the test split as it is; `seen` keeps the splits disjoint.
        write_jsonl(args.out_dir / name / "test.jsonl", generate_rows(templates, key, args.n_test, rng, seen))
        write_jsonl(args.out_dir / name / "train.jsonl", generate_rows(templates, key, args.n_train, rng, seen))
        print(f"wrote {args.out_dir / name}: {args.n_train} train, {args.n_test} test")


if __name__ == "__main__":
    main()
