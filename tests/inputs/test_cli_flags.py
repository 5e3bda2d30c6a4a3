"""One flag style for every entry point: underscores (`--max_new_tokens`), as `gear_trl.train` takes them; the dash
spelling evaluate, inspect and table used before still works, with a one-line warning naming the underscore form."""

from __future__ import annotations

import pytest

from gear_trl.evaluation.cli import make_parser as evaluate_parser
from gear_trl.inputs.flags import FlagParser, deprecation
from gear_trl.table import make_parser as table_parser


def test_the_dash_spelling_parses_as_the_underscore_one_with_a_warning(capsys):
    parser = evaluate_parser()
    underscored = parser.parse_args(["--model", "m", "--max_new_tokens", "8", "--num_samples", "2", "--no_progress"])
    assert capsys.readouterr().err == ""
    dashed = parser.parse_args(["--model", "m", "--max-new-tokens", "8", "--num-samples=2", "--no-progress"])
    assert vars(dashed) == vars(underscored)
    warnings = capsys.readouterr().err.splitlines()
    assert warnings == [
        deprecation("--max-new-tokens", "--max_new_tokens"),
        deprecation("--num-samples", "--num_samples"),
        deprecation("--no-progress", "--no_progress"),
    ]
    assert all(len(line.splitlines()) == 1 and "_" in line.split("write ")[1] for line in warnings)


@pytest.mark.parametrize(
    "parser, argv, dest, value",
    [
        (evaluate_parser, ["--model", "m", "--as-teacher"], "as_teacher", "default"),
        (evaluate_parser, ["--model", "m", "--max-samples", "3"], "max_samples", 3),
        (evaluate_parser, ["--model", "m", "--enable-thinking", "false"], "enable_thinking", False),
        (
            table_parser,
            ["--arm", "a", "r.json", "--baseline", "a", "--seed-pattern", "s(\\d)"],
            "seed_pattern",
            "s(\\d)",
        ),
    ],
)
def test_both_spellings_of_each_entry_points_flags(capsys, parser, argv, dest, value):
    dashed = parser().parse_args(argv)
    assert "deprecated" in capsys.readouterr().err
    underscored = parser().parse_args(["--" + a[2:].replace("-", "_") if a.startswith("--") else a for a in argv])
    assert "deprecated" not in capsys.readouterr().err
    assert getattr(dashed, dest) == getattr(underscored, dest) == value


def test_inspect_takes_both_spellings_and_hands_recipe_fields_on_untouched(monkeypatch, capsys):
    from gear_trl import inspect_credit

    handed = []
    monkeypatch.setattr(inspect_credit, "parse_args", lambda rest: handed.append(rest) or ("recipe",))
    options, _ = inspect_credit.parse_cli(["--num-rollouts", "2", "--first-n", "--max_completion_length", "64"])
    assert options.num_rollouts == 2 and options.first_n
    assert handed[0][:2] == ["--max_completion_length", "64"]
    assert capsys.readouterr().err.count("deprecated") == 2
    options, _ = inspect_credit.parse_cli(["--num_rollouts", "3", "--first_n"])
    assert options.num_rollouts == 3 and options.first_n and "deprecated" not in capsys.readouterr().err


def test_the_help_shows_only_underscores():
    for parser in (evaluate_parser(), table_parser()):
        flags = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
        assert flags and not [flag for flag in flags if "-" in flag[2:]]


def test_what_the_parser_does_not_know_and_what_follows_a_bare_double_dash_stay_as_written(capsys):
    parser = FlagParser(prog="x", allow_abbrev=False)
    parser.add_argument("--known_flag")
    options, rest = parser.parse_known_args(["--known-flag", "1", "--other-flag", "2", "--", "--known-flag"])
    assert options.known_flag == "1"
    assert rest == ["--other-flag", "2", "--", "--known-flag"]
    assert capsys.readouterr().err.count("deprecated") == 1
