"""Print xpgym's internal import graph and check its dependency rules.

    python scripts/import_graph.py                 # the graph of xpgym.core, one module a line
    python scripts/import_graph.py --package xpgym # the whole package
    python scripts/import_graph.py --check         # exit 1 and name every broken rule

Reads the sources with `ast` (nothing is imported), so it sees every import, lazy ones inside
functions included. The rules are the dependency direction of docs/architecture.md:

- `xpgym.core` imports none of `xpgym.envs`, `xpgym.adapters`, `xpgym.remote`, `xpgym.eval`,
  `xpgym.reference`; `xpgym` never imports `recipes` or `parity`;
- outside `xpgym.core.wrappers`, no core module imports a wrapper module, and no core module
  imports the vector collector `xpgym.core.rollout`;
- the records (`xpgym.core.chat`, `xpgym.core.trajectory`, `xpgym.core.layouts`) import no
  wrapper, policy, vector env, recorder, runner or collector;
- no env family imports another (`xpgym.envs.<family>` may import only itself and
  `xpgym.envs.common`).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CORE_MUST_NOT_IMPORT = (
    "xpgym.envs",
    "xpgym.adapters",
    "xpgym.remote",
    "xpgym.eval",
    "xpgym.reference",
)
RECORDS = ("xpgym.core.chat", "xpgym.core.trajectory", "xpgym.core.layouts")
RECORDS_MUST_NOT_IMPORT = (
    "xpgym.core.wrappers",
    "xpgym.core.policies",
    "xpgym.core.vector",
    "xpgym.core.recorder",
    "xpgym.core.episode_runner",
    "xpgym.core.rollout",
)


def module_name(path: Path) -> str:
    """``xpgym/core/env.py`` -> ``xpgym.core.env``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> Iterator[str]:
    """Every module named by an import statement in ``path``, relative imports resolved.

    ``from a.b import c`` yields ``a.b.c`` as well as ``a.b``: ``c`` may be a submodule.
    """
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            yield source
            yield from (f"{source}.{alias.name}" for alias in node.names if alias.name != "*")


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``xpgym``/``recipes``/``parity`` it imports (those that exist)."""
    files = sorted((ROOT / package.replace(".", "/")).rglob("*.py"))
    known = {module_name(p) for p in (ROOT / "xpgym").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in files:
        targets = set()
        for target in imported_modules(path):
            if target.split(".")[0] in {"recipes", "parity"} or target in known:
                targets.add(target)
        graph[module_name(path)] = targets - {module_name(path)}
    return graph


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def broken_rules(graph: dict[str, set[str]]) -> list[str]:
    """One line per import that breaks a rule of this module's docstring."""
    problems = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            rule = _rule_broken(source, target)
            if rule:
                problems.append(f"{source} imports {target}: {rule}")
    return problems


def _rule_broken(source: str, target: str) -> str | None:
    if target.split(".")[0] in {"recipes", "parity"}:
        return "xpgym never imports recipes or parity"
    if not _within(source, "xpgym.core"):
        return _env_family_rule(source, target)
    if any(_within(target, banned) for banned in CORE_MUST_NOT_IMPORT):
        return "core imports no env, adapter, remote, eval or reference module"
    if any(_within(source, record) for record in RECORDS) and any(
        _within(target, banned) for banned in RECORDS_MUST_NOT_IMPORT
    ):
        return "records import no wrapper, policy, vector env, loop or collector"
    if not _within(source, "xpgym.core.wrappers") and _within(target, "xpgym.core.wrappers"):
        return "outside core.wrappers, core imports no wrapper"
    if source != "xpgym.core.rollout" and _within(target, "xpgym.core.rollout"):
        return "no core module imports the vector collector"
    return None


def _env_family_rule(source: str, target: str) -> str | None:
    source_parts, target_parts = source.split("."), target.split(".")
    if len(source_parts) < 3 or source_parts[1] != "envs" or target_parts[:2] != ["xpgym", "envs"]:
        return None
    if len(target_parts) < 3:
        return None  # `from xpgym.envs import ...` names a family and is checked as such
    family, imported = source_parts[2], target_parts[2]
    if imported in {family, "common"}:
        return None
    return "no env family imports another (shared helpers live in xpgym.envs.common)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="xpgym.core", help="package whose graph to print")
    parser.add_argument("--check", action="store_true", help="check the rules over all of xpgym")
    args = parser.parse_args(argv)
    if args.check:
        problems = broken_rules(import_graph("xpgym"))
        for line in problems:
            print(line)
        print(f"{len(problems)} broken dependency rules" if problems else "dependency rules hold")
        return 1 if problems else 0
    graph = import_graph(args.package)
    for source, targets in graph.items():
        inside = sorted(t for t in targets if _within(t, args.package) and t in graph)
        print(f"{source} -> {', '.join(inside) if inside else '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
