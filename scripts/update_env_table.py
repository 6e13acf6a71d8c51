"""Regenerate the env table in README.md from the registry.

Usage:
    python scripts/update_env_table.py            # rewrite the table in place
    python scripts/update_env_table.py --check    # exit 1 if the table is stale

The table lies between ``<!-- env-table:start -->`` and ``<!-- env-table:end -->``; the
rest of the README is left as it is. Exit status 2 means the markers are missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from xpgym.envs.catalogue import replace_env_table

README = Path(__file__).resolve().parent.parent / "README.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether it is stale")
    parser.add_argument("--readme", type=Path, default=README, help="default: the repo README")
    args = parser.parse_args(argv)
    text = args.readme.read_text(encoding="utf-8")
    try:
        updated = replace_env_table(text)
    except ValueError as exc:
        print(f"{args.readme}: {exc}", file=sys.stderr)
        return 2
    if updated == text:
        print(f"{args.readme}: env table is up to date")
        return 0
    if args.check:
        print(
            f"{args.readme}: env table is stale; run python scripts/update_env_table.py",
            file=sys.stderr,
        )
        return 1
    args.readme.write_text(updated, encoding="utf-8")
    print(f"{args.readme}: env table updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
