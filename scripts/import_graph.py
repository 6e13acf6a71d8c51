"""Print xpgym's internal import graph and check its dependency rules.

    python scripts/import_graph.py                 # the graph of xpgym.core, one module a line
    python scripts/import_graph.py --package xpgym # the whole package
    python scripts/import_graph.py --check         # exit 1 and name every broken rule

Reads the sources with `ast` (nothing is imported), so it sees every import, lazy ones inside
functions and ``TYPE_CHECKING`` ones included. The rules are the dependency direction of
docs/architecture.md:

- each package of `xpgym` imports only the packages `ALLOWED` lists for it (the three floors:
  `xpgym.core` imports no other xpgym package; `xpgym.envs`, `xpgym.rollout` and
  `xpgym.training` import `xpgym.core`; `xpgym.eval` adds `xpgym.rollout`; `xpgym.adapters`
  and `xpgym.reference` add `xpgym.rollout` and `xpgym.training`), and a package missing from
  `ALLOWED` is itself a broken rule (a new package says where it stands);
- `xpgym` never imports `recipes` or `parity`;
- outside `xpgym.core.wrappers`, no core module imports a wrapper module;
- the records (`xpgym.core.chat`, `xpgym.core.trajectory`) import no wrapper, vector env,
  tool or sandbox;
- no env family imports another (`xpgym.envs.<family>` may import only itself and
  `xpgym.envs.common`);
- no import circle among the modules of `xpgym`, nor among those of `parity`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ALLOWED: dict[str, tuple[str, ...]] = {
    "xpgym.core": (),
    "xpgym.envs": ("xpgym.core",),
    "xpgym.rollout": ("xpgym.core",),
    "xpgym.training": ("xpgym.core",),
    "xpgym.eval": ("xpgym", "xpgym.core", "xpgym.rollout"),
    "xpgym.adapters": ("xpgym", "xpgym.core", "xpgym.rollout", "xpgym.training"),
    "xpgym.reference": ("xpgym", "xpgym.core", "xpgym.rollout", "xpgym.training"),
    "xpgym.remote": ("xpgym.core",),
    "xpgym.compat": ("xpgym.core",),
    "xpgym.viewer": ("xpgym.core", "xpgym.training", "xpgym.eval"),
    "xpgym.mcp_servers": (),
    "xpgym.data": (),
}
"""Package -> the other xpgym packages it may import (``"xpgym"`` is the top-level package,
whose ``__init__`` is the public facade). The top-level modules (``xpgym/__init__.py``,
``__main__``, ``recipe_args``) are the entry points and may import any package."""

TOP_LEVEL_MODULES = ("xpgym", "xpgym.__main__", "xpgym.recipe_args")
RECORDS = ("xpgym.core.chat", "xpgym.core.trajectory")
RECORDS_MUST_NOT_IMPORT = (
    "xpgym.core.wrappers",
    "xpgym.core.vector",
    "xpgym.core.tools",
    "xpgym.core.sandbox",
)


def module_name(path: Path) -> str:
    """``xpgym/core/env.py`` -> ``xpgym.core.env``; a package's ``__init__.py`` -> the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, known: set[str], name: str | None = None) -> Iterator[str]:
    """Every module named by an import statement in ``path`` (the module `name`, by default
    the one its place in the repository names), relative imports resolved.

    ``from a.b import c`` names ``a.b.c`` when that is a module of `known`, else ``a.b`` (``c``
    is then a name defined in ``a.b``).
    """
    name = name or module_name(path)
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
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                yield submodule if submodule in known else source


def import_graph(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``xpgym``/``recipes``/``parity`` it imports (those that exist)."""
    files = sorted((ROOT / package.replace(".", "/")).rglob("*.py"))
    known = {module_name(p) for top in ("xpgym", "parity") for p in (ROOT / top).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in files:
        targets = set()
        for target in imported_modules(path, known):
            if target.split(".")[0] == "recipes" or target in known:
                targets.add(target)
        graph[module_name(path)] = targets - {module_name(path)}
    return graph


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _package(module: str) -> str:
    """``xpgym.core.vector.base`` -> ``xpgym.core``; a top-level module -> itself."""
    return module if module in TOP_LEVEL_MODULES else ".".join(module.split(".")[:2])


def broken_rules(graph: dict[str, set[str]]) -> list[str]:
    """One line per import that breaks a rule of this module's docstring, then one per
    package that has no rule, then one per import circle."""
    problems = []
    for source, targets in sorted(graph.items()):
        for target in sorted(targets):
            rule = _rule_broken(source, target)
            if rule:
                problems.append(f"{source} imports {target}: {rule}")
    packages = {_package(m) for m in graph if m.startswith("xpgym")} - set(TOP_LEVEL_MODULES)
    problems += [f"{p} has no rule in ALLOWED" for p in sorted(packages - set(ALLOWED))]
    problems += [f"import circle: {' -> '.join(c)}" for c in import_circles(graph)]
    return problems


def _rule_broken(source: str, target: str) -> str | None:
    if not source.startswith("xpgym"):
        return None
    if target.split(".")[0] in {"recipes", "parity"}:
        return "xpgym never imports recipes or parity"
    floor = _package(source)
    if floor in ALLOWED:
        imported = _package(target)
        if imported != floor and imported not in ALLOWED[floor]:
            if not ALLOWED[floor]:
                return f"{floor} imports no other xpgym package"
            return f"{floor} may import only {', '.join(ALLOWED[floor])}"
    if _within(source, "xpgym.core"):
        if any(_within(source, record) for record in RECORDS) and any(
            _within(target, banned) for banned in RECORDS_MUST_NOT_IMPORT
        ):
            return "records import no wrapper, vector env, tool or sandbox"
        if not _within(source, "xpgym.core.wrappers") and _within(target, "xpgym.core.wrappers"):
            return "outside core.wrappers, core imports no wrapper"
    return _env_family_rule(source, target)


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


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each set of modules that import each other in a circle (a strongly connected component
    of more than one module, or a module importing itself), as one closed path through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(root: str) -> None:  # Tarjan's algorithm, iterative (no recursion limit)
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(_closed_path(graph, set(component)))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def _closed_path(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A path inside `component` from its first module back to it (breadth-first, shortest)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not a circle")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", default="xpgym.core", help="package whose graph to print")
    parser.add_argument(
        "--check", action="store_true", help="check the rules over all of xpgym and parity"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = broken_rules(import_graph("xpgym"))
        problems += [
            f"import circle: {' -> '.join(c)}" for c in import_circles(import_graph("parity"))
        ]
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
