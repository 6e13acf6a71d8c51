"""Presenting an evaluation: the text table, the PNG plot, package versions, a progress bar.

matplotlib and tqdm are optional: without matplotlib no PNG is written (a warning says so);
without tqdm the progress is one updating line on stderr.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import platform
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from xpgym.core.optional import import_optional
from xpgym.eval.metrics import SummaryRow

__all__ = ["format_table", "package_versions", "plot_summary", "progress_bar"]

logger = logging.getLogger(__name__)

_PACKAGES = ("xpgym", "numpy", "torch", "transformers", "tokenizers", "vllm", "matplotlib")
_EXTRA = 'pip install "xpgym[eval]"'


def package_versions() -> dict[str, str]:
    """Python's version and the installed versions of the packages an evaluation may use."""
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            versions[name] = importlib.metadata.version(name)
    return versions


def format_table(rows: Sequence[SummaryRow]) -> str:
    """The summary as an aligned text table, one line per row, with a header.

    Columns: env, agent, model, done (completed/planned), failed, infra (episodes ended by
    an infrastructure failure), success rate, mean return, mean turns, invalid-action rate,
    mean generated tokens, then one ``pass@k`` column per k that any row has. ``-`` marks a
    value that is not known.
    """
    ks = sorted({int(k) for row in rows for k in row.pass_at_k})
    header = ["ENV", "AGENT", "MODEL", "DONE", "FAILED", "INFRA", "SUCCESS", "RETURN", "TURNS"]
    header += ["INVALID"]
    header += ["TOKENS", *(f"PASS@{k}" for k in ks)]
    table = [header]
    for row in rows:
        table.append(
            [
                row.env_id,
                row.agent or "-",
                row.model,
                f"{row.completed}/{row.episodes}",
                str(row.failed),
                str(row.infra_errors),
                _number(row.success_rate, ".3f"),
                _number(row.mean_return, ".3f"),
                _number(row.mean_turns, ".2f"),
                _number(row.invalid_action_rate, ".3f"),
                _number(row.mean_tokens, ".1f"),
                *(_number(row.pass_at_k.get(str(k)), ".3f") for k in ks),
            ]
        )
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def _number(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def plot_summary(rows: Sequence[SummaryRow], path: str | Path, *, title: str = "") -> bool:
    """Write a PNG: per row, horizontal bars of the success rate and of each Pass@k, k > 1
    (Pass@1 is the success rate unless failures left problems with fewer samples).

    Returns:
        True if written; False (with a warning) if matplotlib is not installed.
    """
    try:
        matplotlib = import_optional("matplotlib", needed_by="the eval plot", install=_EXTRA)
    except ImportError as exc:
        logger.warning("%s; no PNG written", exc)
        return False
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    labels = [row.env_id + (f" [{row.agent}]" if row.agent else "") for row in rows]
    series: list[tuple[str, list[float]]] = [
        ("success rate", [row.success_rate or 0.0 for row in rows])
    ]
    ks = sorted({int(k) for row in rows for k in row.pass_at_k} - {1})
    series += [(f"pass@{k}", [row.pass_at_k.get(str(k), 0.0) for row in rows]) for k in ks]
    height = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.3 * len(rows) * len(series)))
    for j, (name, values) in enumerate(series):
        ax.barh([i + j * height for i in range(len(rows))], values, height=height, label=name)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(rows))], labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of episodes (pass@k: of problems)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


@contextlib.contextmanager
def progress_bar(total: int) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A progress bar on stderr for `total` episodes; yields the callback to call with each
    finished record (the bar counts the failed ones). tqdm if installed, else a text line."""
    failed = 0
    try:
        tqdm = import_optional("tqdm", needed_by="the eval progress bar", install=_EXTRA).tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        with tqdm(total=total, unit="episode", dynamic_ncols=True) as bar:

            def advance(record: dict[str, Any]) -> None:
                nonlocal failed
                failed += record["status"] == "failed"
                bar.set_postfix(failed=failed, refresh=False)
                bar.update(1)

            yield advance
        return
    done = 0

    def write_line(record: dict[str, Any]) -> None:
        nonlocal done, failed
        done += 1
        failed += record["status"] == "failed"
        sys.stderr.write(f"\r{done}/{total} episodes ({failed} failed)")
        sys.stderr.flush()

    yield write_line
    sys.stderr.write("\n")
