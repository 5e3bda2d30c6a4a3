"""One flag style for every entry point: underscores, as `gear_trl.train` takes them (TRL's parser, `--max_steps`).

`FlagParser` is an `argparse.ArgumentParser` whose options are written with underscores (`--max_new_tokens`); the
dash spelling of the same option (`--max-new-tokens`, the style `evaluate`, `inspect` and `table` used before) is
still accepted, with a one-line warning on stderr naming the underscore form.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def deprecation(dashed: str, underscored: str) -> str:
    """The warning a dashed flag gets."""
    return f"warning: {dashed} is deprecated, write {underscored} (every gear_trl command takes underscores)"


class FlagParser(argparse.ArgumentParser):
    """An `ArgumentParser` that reads `--some-option` as `--some_option` when only the latter is one of its options,
    warning once per flag; anything after a bare `--`, and any option it does not know, is left as written (the
    inspect command hands those on to the recipe's parser)."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self.underscored(args), namespace)

    def underscored(self, args: list[str]) -> list[str]:
        """`args` with every dashed spelling of an option of this parser written with underscores."""
        out, warned = [], set()
        for position, arg in enumerate(args):
            if arg == "--":
                return out + args[position:]
            flag, equals, value = arg.partition("=")
            if flag.startswith("--") and "-" in flag[2:] and flag not in self._option_string_actions:
                underscored = "--" + flag[2:].replace("-", "_")
                if underscored in self._option_string_actions:
                    if flag not in warned:
                        print(deprecation(flag, underscored), file=sys.stderr)
                        warned.add(flag)
                    arg = underscored + equals + value
            out.append(arg)
        return out
