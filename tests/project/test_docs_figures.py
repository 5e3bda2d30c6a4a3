"""Figures the docs quote are read from their source (issue 32): a recipe field the docs quote for the shipped Qwen3
recipes has the value those recipes give it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
QWEN_RECIPES = sorted(REPO.glob("recipes/Qwen3-*/*/config_*.yaml"))
# "the shipped Qwen3 recipes set `lora_dropout: 0.0`", "recipes' `use_peft: true`": a field quoted for the recipes.
RECIPE_FIELD = re.compile(r"[Rr]ecipes(?:'|\s+\w+){0,2}\s+`(\w+): ([^`]+)`")


def documents() -> dict[str, str]:
    pages = {path.relative_to(REPO).as_posix(): path.read_text(encoding="utf-8") for path in REPO.glob("docs/**/*.md")}
    return {"README.md": README.read_text(encoding="utf-8"), **pages}


def test_recipe_fields_the_docs_quote_are_the_recipes_values():
    recipes = [yaml.safe_load(path.read_text()) for path in QWEN_RECIPES]
    quoted = []
    for name, text in documents().items():
        for key, value in RECIPE_FIELD.findall(" ".join(text.split())):
            quoted.append((name, key, value))
            shipped = {repr(recipe[key]) for recipe in recipes if key in recipe}
            assert shipped, f"{name} quotes `{key}` for the recipes, which do not set it"
            assert shipped == {repr(yaml.safe_load(value))}, f"{name}: `{key}: {value}`, the recipes: {shipped}"
    assert ("docs/configuration.md", "lora_dropout", "0.0") in quoted
