"""Command line: ``python -m xpgym <command>`` (also installed as ``xpgym``).

Commands:
    list [PATTERN] [--json]   Registered env ids with description and entry point.

Output goes through `sys.stdout.write` (the project's lint forbids `print` in the package).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from xpgym.envs.catalogue import EnvRow, env_rows

__all__ = ["build_parser", "main"]

_GLOB_CHARS = frozenset("*?[")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, one subcommand per command (each sets ``func``)."""
    parser = argparse.ArgumentParser(
        prog="xpgym", description="xpgym: a gym for agentic LLMs (text environments)."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = commands.add_parser(
        "list",
        help="list registered env ids",
        description="List registered env ids with their description and entry point.",
    )
    listing.add_argument(
        "pattern",
        nargs="?",
        metavar="PATTERN",
        help="glob over ids, e.g. 'game:*' or '*-easy'; without a wildcard, ids containing "
        "PATTERN (case-sensitive)",
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of {id, description, entry_point, kwargs} objects",
    )
    listing.set_defaults(func=_list_command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`); return the exit status."""
    args = build_parser().parse_args(argv)
    return args.func(args)


def _list_command(args: argparse.Namespace) -> int:
    pattern = args.pattern
    if pattern is not None and not _GLOB_CHARS & set(pattern):
        pattern = f"*{pattern}*"
    rows = env_rows(pattern)
    if args.json:
        sys.stdout.write(json.dumps([asdict(r) for r in rows], indent=2, default=repr) + "\n")
        return 0
    if not rows:
        sys.stderr.write(f"no env ids match {args.pattern!r}\n")
        return 1
    sys.stdout.write(_text_table(rows) + "\n")
    return 0


def _text_table(rows: list[EnvRow]) -> str:
    table = [("ID", "DESCRIPTION", "ENTRY POINT")]
    table += [(row.id, row.description or "-", row.entry_point) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(2)]
    return "\n".join(
        f"{env_id:<{widths[0]}}  {description:<{widths[1]}}  {entry_point}"
        for env_id, description, entry_point in table
    )


if __name__ == "__main__":
    sys.exit(main())
