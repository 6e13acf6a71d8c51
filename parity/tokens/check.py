"""Layer 1 of the parity suite: every trainer's batch layout and advantages on the golden cases.

    python -m parity.tokens [--trainer verl ...] [--case ragged ...] [--report PATH]
    python -m parity.tokens --write-docs   # also regenerate the table in docs/trainers.md

For each trainer (``parity/tokens/<trainer>.py``), each golden case (`parity.tokens.cases`)
and each of the trainer's estimators: convert the episodes with the trainer's xpgym adapter,
compute the advantages with the trainer's own code where it imports on CPU, and classify them
against
`xpgym.training.advantages` (`parity.tokens.core.classify`: exact / formula / mismatch / not
runnable). The trainer's layout checks run on the same batches. Prints a table (rich when
installed), writes ``parity/report.json``, and exits 1 on any mismatch or failed layout
check (0 otherwise; ``not runnable`` is not a failure, it is reported).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from parity.shared import reports
from parity.shared.trainer_code import NotRunnableError
from parity.tokens.cases import CASES, Case, case_by_name
from parity.tokens.core import (
    Estimator,
    Outcome,
    TrainerSpec,
    classify,
    reference_tokens,
)

__all__ = [
    "DOCS_PATH",
    "TRAINERS",
    "docs_with_table",
    "failures",
    "main",
    "markdown_table",
    "print_table",
    "run",
    "table_rows",
]

logger = logging.getLogger(__name__)

TRAINERS: tuple[str, ...] = ("verl", "openrlhf", "rl2", "oat", "roll", "trl")
"""Trainer modules under ``parity.tokens``, in table order."""

DOCS_PATH = reports.DOCS_DIR / "trainers.md"
"""The one home of the trainers' differences; its parity table is generated from the report."""

TABLE_START, TABLE_END = "<!-- parity-table:start -->", "<!-- parity-table:end -->"


def _spec(name: str) -> TrainerSpec:
    return importlib.import_module(f"parity.tokens.{name}").SPEC


def _estimate(estimator: Estimator, case: Case, episodes: list, perturb: float) -> dict[str, Any]:
    row: dict[str, Any] = {"algorithm": estimator.algorithm, "code": estimator.code}
    if estimator.run is None:
        return {**row, "status": "not runnable", "detail": estimator.why_not}
    try:
        got = estimator.run(case, episodes)
    except NotRunnableError as err:
        return {**row, "status": "not runnable", "detail": str(err)}
    if perturb:  # the checker's self-test: a planted difference must be caught
        got = [g.copy() for g in got]
        got[0][0] += perturb
    reference = reference_tokens(estimator.algorithm, episodes, case.gamma)
    formula = estimator.formula.expected(case, episodes) if estimator.formula else None
    outcome: Outcome = classify(
        got, reference, formula, estimator.formula.text if estimator.formula else ""
    )
    return {
        **row,
        "status": outcome.status,
        "detail": outcome.detail,
        "error_vs_reference": outcome.error_vs_reference,
        "error_vs_formula": outcome.error_vs_formula,
    }


def _run_trainer(spec: TrainerSpec, cases: Sequence[Case], perturb: float) -> dict[str, Any]:
    result: dict[str, Any] = {"version": spec.version(), "layout": [], "advantages": []}
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(spec.load())
    except ImportError as err:
        why = f"cannot import: {err}"
        result["not_runnable"] = why
        for case in cases:
            for estimator in spec.estimators:
                result["advantages"].append(
                    {
                        "case": case.name,
                        "algorithm": estimator.algorithm,
                        "code": estimator.code,
                        "status": "not runnable",
                        "detail": why,
                    }
                )
        return result
    with stack:
        for case in cases:
            episodes = case.episodes()
            for check in spec.layout(case, episodes):
                result["layout"].append(
                    {"case": case.name, "check": check.name, "ok": check.ok, "detail": check.detail}
                )
            for estimator in spec.estimators:
                row = _estimate(estimator, case, case.episodes(), perturb)
                result["advantages"].append({"case": case.name, **row})
    return result


def run(
    trainers: Sequence[str] = TRAINERS,
    cases: Sequence[Case] = CASES,
    *,
    perturb: float = 0.0,
) -> dict[str, Any]:
    """Run the check; return the report (the structure of ``parity/report.json``).

    Args:
        trainers: Names from `TRAINERS`.
        cases: Golden cases.
        perturb: Added to the first advantage of every estimator's output before the
            comparison (0: off). A test-only self-check that the classifier catches a
            planted difference.

    Returns:
        ``{"cases": {name: {gamma, covers}}, "trainers": {name: {version, layout: [...],
        advantages: [...], not_runnable?}}, "summary": {status: count}, "seconds": float}``.
    """
    start = time.perf_counter()
    report: dict[str, Any] = {
        "cases": {c.name: {"gamma": c.gamma, "covers": c.covers} for c in cases},
        "trainers": {},
    }
    for name in trainers:
        report["trainers"][name] = _run_trainer(_spec(name), cases, perturb)
    summary: dict[str, int] = {}
    for trainer in report["trainers"].values():
        for row in trainer["advantages"]:
            summary[row["status"]] = summary.get(row["status"], 0) + 1
        failed = sum(not check["ok"] for check in trainer["layout"])
        summary["layout ok"] = summary.get("layout ok", 0) + len(trainer["layout"]) - failed
        summary["layout failed"] = summary.get("layout failed", 0) + failed
    report["summary"] = summary
    report["seconds"] = round(time.perf_counter() - start, 2)
    return report


def failures(report: dict[str, Any]) -> list[str]:
    """Every mismatch and failed layout check of `report`, one line each."""
    out = []
    for name, trainer in report["trainers"].items():
        for row in trainer["advantages"]:
            if row["status"] == "mismatch":
                out.append(f"{name} {row['code']} on {row['case']}: {row['detail']}")
        for check in trainer["layout"]:
            if not check["ok"]:
                out.append(f"{name} layout on {check['case']}: {check['check']} {check['detail']}")
    return out


def _cell(rows: list[dict[str, Any]]) -> str:
    statuses = {r["status"] for r in rows}
    if statuses == {"not runnable"}:
        return "not runnable"
    if "mismatch" in statuses:
        return "MISMATCH"
    return "formula" if "formula" in statuses else "exact"


def table_rows(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the summary table: one row per trainer x estimator, one column
    per case (the status), plus the formula or the reason not runnable."""
    cases = list(report["cases"])
    header = ["trainer", "algorithm", "trainer code", *cases, "difference / why not runnable"]
    rows = []
    for name, trainer in report["trainers"].items():
        by_code: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in trainer["advantages"]:
            by_code.setdefault((row["algorithm"], row["code"]), []).append(row)
        for (algorithm, code), results in by_code.items():
            cells = [_cell([r for r in results if r["case"] == c]) for c in cases]
            notes = sorted({r["detail"] for r in results if r["detail"]})
            rows.append([name, algorithm, code, *cells, "; ".join(notes)])
        layout = trainer["layout"]
        if layout:
            cells = [
                "ok" if all(c["ok"] for c in layout if c["case"] == case) else "FAILED"
                for case in cases
            ]
            rows.append([name, "layout", f"{len(layout) // len(cases)} checks/case", *cells, ""])
    return header, rows


def print_table(report: dict[str, Any], file: Any = None) -> None:
    """Print the summary table (rich when installed, else plain text)."""
    header, rows = table_rows(report)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        out = file or sys.stdout
        out.write(" | ".join(header) + "\n")
        for row in rows:
            out.write(" | ".join(row) + "\n")
        return
    table = Table(
        *header, title="parity: trainer advantages and layouts vs xpgym.training.advantages"
    )
    for row in rows:
        table.add_row(*row)
    Console(file=file, width=240).print(table)


def markdown_table(report: dict[str, Any]) -> str:
    """The summary table as GitHub markdown (for docs/trainers.md)."""
    return reports.markdown_table(*table_rows(report))


def docs_with_table(text: str, report: dict[str, Any]) -> str:
    """`text` (docs/trainers.md) with the markdown table of `report` between its
    ``parity-table`` markers; raises `ValueError` when the markers are missing."""
    return reports.replace_block(text, TABLE_START, TABLE_END, markdown_table(report))


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the exit status (1 on any failure)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trainer", action="append", choices=TRAINERS, help="default: all")
    parser.add_argument("--case", action="append", help="default: all")
    parser.add_argument("--report", type=Path, default=reports.REPORT_PATH)
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument(
        "--write-docs", action="store_true", help=f"rewrite the parity table in {DOCS_PATH}"
    )
    args = parser.parse_args(argv)
    if args.write_docs and (args.trainer or args.case):
        parser.error("--write-docs needs the whole report: drop --trainer and --case")
    cases = [case_by_name(c) for c in args.case] if args.case else list(CASES)
    report = run(args.trainer or TRAINERS, cases)
    reports.merge_into_report(args.report, report)
    if args.markdown:
        sys.stdout.write(markdown_table(report))
    else:
        print_table(report)
    if args.write_docs:
        DOCS_PATH.write_text(docs_with_table(DOCS_PATH.read_text(encoding="utf-8"), report))
    bad = failures(report)
    for line in bad:
        logger.error("%s", line)
    logger.info(
        "summary %s in %.1f s; report: %s", report["summary"], report["seconds"], args.report
    )
    return 1 if bad else 0
