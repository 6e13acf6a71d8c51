"""Command line: ``python -m xpgym <command>`` (also installed as ``xpgym``).

Commands:
    list [PATTERN] [--json]   Registered env ids with description and entry point.
    serve --env GLOB [--port N] ...
                              Serve envs over HTTP (see `xpgym.remote.server`).

Output goes through `sys.stdout.write` (the project's lint forbids `print` in the package).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict

from xpgym.envs.catalogue import DOWNLOAD_NOTE, EnvRow, env_rows

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
    _add_serve_parser(commands)
    return parser


def _add_serve_parser(commands: argparse._SubParsersAction) -> None:
    serving = commands.add_parser(
        "serve",
        help="serve envs over HTTP for remote clients",
        description="Serve envs over HTTP/JSON in sessions. Clients use "
        "xpgym.make('remote:http://HOST:PORT/<env id>'). Protocol: xpgym.remote.server.",
    )
    serving.add_argument(
        "--env",
        action="append",
        required=True,
        metavar="GLOB",
        help="env ids clients may create (glob, repeatable), e.g. 'game:*' or '*'",
    )
    serving.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default %(default)s)"
    )
    serving.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    serving.add_argument(
        "--max-sessions", type=int, default=256, help="open sessions allowed (default %(default)s)"
    )
    serving.add_argument(
        "--idle-timeout",
        type=float,
        default=300.0,
        help="seconds without a request before a session is closed (default %(default)s)",
    )
    serving.add_argument(
        "--threads", type=int, default=None, help="threads for env calls (default: max sessions)"
    )
    serving.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (e.g. one that registers your envs); repeatable",
    )
    serving.add_argument("--log-level", default="warning", help="log level (default %(default)s)")
    serving.set_defaults(func=_serve_command)


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


def _serve_command(args: argparse.Namespace) -> int:
    from xpgym.remote.server import serve  # needs starlette + uvicorn: import on use

    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    for module in args.imports:
        importlib.import_module(module)
    sys.stderr.write(
        f"serving {', '.join(args.env)} on http://{args.host}:{args.port} "
        f"(max {args.max_sessions} sessions, idle timeout {args.idle_timeout:g} s)\n"
    )
    serve(
        args.env,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        threads=args.threads,
    )
    return 0


def _text_table(rows: list[EnvRow]) -> str:
    table = [("ID", "DESCRIPTION", "ENTRY POINT")]
    table += [
        (
            row.id,
            (row.description or "-") + (DOWNLOAD_NOTE if row.requires_download else ""),
            row.entry_point,
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(2)]
    return "\n".join(
        f"{env_id:<{widths[0]}}  {description:<{widths[1]}}  {entry_point}"
        for env_id, description, entry_point in table
    )


if __name__ == "__main__":
    sys.exit(main())
