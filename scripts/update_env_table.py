"""Regenerate the env tables from the registry: every id in docs/envs.md, one row per category
in README.md.

Usage:
    python scripts/update_env_table.py            # rewrite both tables in place
    python scripts/update_env_table.py --check    # exit 1 if either table is stale

In each file the table lies between ``<!-- env-table:start -->`` and ``<!-- env-table:end -->``;
the rest of the file is left as it is. Exit status 2 means a file's markers are missing.
Lazily registered families (``rg:``) are in neither table: `list_envs` shows them only when
asked for their category.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from xpgym.core.env import ENV_ID_PATTERN
from xpgym.envs.catalogue import EnvRow, env_rows, render_env_table, replace_env_table

ROOT = Path(__file__).resolve().parent.parent
ENVS_DOC = ROOT / "docs" / "envs.md"
README = ROOT / "README.md"
COMMAND = "scripts/update_env_table.py"


def render_category_table(rows: list[EnvRow]) -> str:
    """One Markdown row per category: its registered ids (how many download data) and the
    names of its envs, sorted; no trailing newline."""
    by_category: dict[str, list[EnvRow]] = defaultdict(list)
    for row in rows:
        by_category[row.id.partition(":")[0]].append(row)
    lines = ["| Category | Ids | Envs |", "| --- | --- | --- |"]
    for category, members in sorted(by_category.items()):
        names = sorted({ENV_ID_PATTERN.match(row.id)["name"] for row in members})
        downloads = sum(row.requires_download for row in members)
        count = f"{len(members)}" + (f" ({downloads} download data)" if downloads else "")
        lines.append(f"| `{category}:` | {count} | {', '.join(names)} |")
    return "\n".join(lines)


def update(path: Path, table: str, check: bool) -> int:
    """Put `table` between the markers of `path`; 0 if it was current (or is now), 1 if it is
    stale and `check`, 2 if the markers are missing."""
    text = path.read_text(encoding="utf-8")
    try:
        updated = replace_env_table(text, table)
    except ValueError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 2
    if updated == text:
        print(f"{path}: env table is up to date")
        return 0
    if check:
        print(f"{path}: env table is stale; run python {COMMAND}", file=sys.stderr)
        return 1
    path.write_text(updated, encoding="utf-8")
    print(f"{path}: env table updated")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether one is stale")
    parser.add_argument("--doc", type=Path, default=ENVS_DOC, help="default: docs/envs.md")
    parser.add_argument("--readme", type=Path, default=README, help="default: the repo README")
    args = parser.parse_args(argv)
    rows = env_rows()
    statuses = [
        update(args.doc, render_env_table(rows), args.check),
        update(args.readme, render_category_table(rows), args.check),
    ]
    return max(statuses)


if __name__ == "__main__":
    sys.exit(main())
