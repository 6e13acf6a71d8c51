"""The prepared GPU check: what one CUDA GPU can show with torch, transformers and what this
repository ships (no vLLM, no Ray, no network), sized to fit 8 minutes (estimated; it has
not run on a GPU yet).

    python -m parity.curves.gpu_check [--out results/gpu_check.json] [--parts demo layer3 trl_e2e]

Parts (`PARTS`), each timed, with the GPU's peak allocated memory where it runs in this
process:

- ``demo``: the CPU demo (``recipes/train_torch.py``) with ``--device cuda`` under a time
  budget (``--demo-budget-s``): steps trained, steps per second of RL, and the before/after
  success of its held-out evaluation (its ``summary.json``);
- ``layer3``: ``python -m parity.update --device cuda``'s run (`parity.update.run`): the
  reference trainer and the runners of `parity.update.CUDA_RUNNERS` (TRL) on CUDA against it;
  every other trainer is reported not runnable (its runner is CPU only, and its packages are
  not on the GPU machine);
- ``trl_e2e``: TRL's own ``GRPOTrainer.train()`` end to end (`parity.e2e.trl.run_trl`, 3
  steps from the warm tiny model) on CUDA, with `parity.e2e.runs.check`'s verdict. TRL is not
  on a bare GPU machine: its wheels are brought (docs/parity.md, "The prepared GPU check");
  without them the part is not runnable, with the reason.

It refuses to start without a CUDA device (`pick_device`), prints the exact command it ran,
and writes one JSON (`check`'s report). Exit status 1 when a part failed (a crash, a
layer-3 mismatch, an end-to-end run that `parity.e2e.runs.check` refuses), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from parity.shared.reports import write_json
from parity.shared.trainer_code import NotRunnableError, package_version

__all__ = ["PARTS", "CheckConfig", "NoCudaError", "check", "main", "pick_device"]

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]


class NoCudaError(RuntimeError):
    """No CUDA device here: the check only runs on a GPU machine."""


def pick_device(cuda_available: bool | None = None) -> str:
    """``"cuda"`` when a CUDA device is visible (`cuda_available`, default: torch's answer).

    Raises:
        NoCudaError: there is none (the message says where the check runs instead).
    """
    if cuda_available is None:
        import torch

        cuda_available = torch.cuda.is_available()
    if not cuda_available:
        raise NoCudaError(
            "no CUDA device: the GPU check runs on a machine with an NVIDIA GPU and a CUDA "
            "build of torch (torch.cuda.is_available() is False here); on CPU, run "
            "python -m parity.update, python -m parity.e2e and recipes/train_torch.py instead"
        )
    return "cuda"


@dataclass(frozen=True)
class CheckConfig:
    """What `check` runs: the `parts` (names of `PARTS`), the demo's time budget, the
    layer-3 and end-to-end steps, and where the parts write (`out_dir`)."""

    parts: tuple[str, ...]
    out_dir: Path
    demo_budget_s: float = 150.0
    layer3_steps: int = 3
    e2e_steps: int = 3


def _demo(device: str, cfg: CheckConfig) -> dict[str, Any]:
    """``recipes/train_torch.py --device <device>`` under ``cfg.demo_budget_s`` (a subprocess)."""
    out = cfg.out_dir / "demo"
    argv = [sys.executable, str(ROOT / "recipes" / "train_torch.py"), "--device", device]
    argv += ["--time-budget-s", str(cfg.demo_budget_s), "--out-dir", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"train_torch.py exited {done.returncode}: {done.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    steps, rl_s = summary["steps_trained"], summary["rl_wall_time_s"]
    return {
        "ok": True,
        "steps_trained": steps,
        "rl_wall_time_s": rl_s,
        "rl_steps_per_s": steps / rl_s if rl_s else None,
        "episodes_per_step": summary["config"]["episodes_per_step"],
        "before": summary["before"],
        "after": summary["after"],
        "wall_time_s": summary["wall_time_s"],
    }


def _layer3(device: str, cfg: CheckConfig) -> dict[str, Any]:
    """`parity.update.run` of every trainer on `device`; not ok on any mismatch."""
    from parity.update import run

    report = run(steps=cfg.layer3_steps, device=device)
    trainers = {
        name: {key: row.get(key) for key in ("status", "detail", "seconds", "steps")}
        for name, row in report["trainers"].items()
    }
    statuses = [row["status"] for row in trainers.values()]
    return {"ok": "mismatch" not in statuses, "summary": report["summary"], "trainers": trainers}


def _trl_e2e(device: str, cfg: CheckConfig) -> dict[str, Any]:
    """TRL's own loop end to end on `device` (`parity.e2e.runs.run`); ok when `check` passes."""
    import importlib.util

    if importlib.util.find_spec("trl") is None:
        raise NotRunnableError(
            "trl is not installed: bring its wheels (docs/parity.md, 'The prepared GPU check')"
        )
    from parity.e2e.config import E2EConfig
    from parity.e2e.runs import check as e2e_check
    from parity.e2e.runs import run

    result = run(["trl"], E2EConfig(steps=cfg.e2e_steps, device=device), cfg.out_dir / "e2e")
    trl = result["trl"]
    problems = e2e_check(trl, cfg.e2e_steps)
    return {"ok": not problems, "problems": problems, **trl}


PARTS: dict[str, Callable[[str, CheckConfig], dict[str, Any]]] = {
    "demo": _demo,
    "layer3": _layer3,
    "trl_e2e": _trl_e2e,
}
"""Each part: ``part(device, cfg) -> result`` with ``ok`` (False: the check fails); raises
`NotRunnableError` where what it needs is not on the machine."""


def _reset_peak() -> None:
    import torch

    torch.cuda.reset_peak_memory_stats()


def _peak_gib() -> float:
    import torch

    return torch.cuda.max_memory_allocated() / 2**30


def check(cfg: CheckConfig, device: str) -> dict[str, Any]:
    """Run ``cfg.parts`` on `device`; the report.

    Returns:
        ``{"device", "versions", "config", "parts": {name: {"status", "seconds",
        "peak_gib", "result" | "error"}}}``; ``status`` is ``ok``, ``failed`` (a crash, or
        the part's result not ok) or ``not runnable`` (what it needs is missing: the
        reason in ``error``). ``peak_gib`` is the GPU's peak allocated memory in this
        process during the part (None for the demo, a subprocess).
    """
    report: dict[str, Any] = {
        "device": _describe(device),
        "versions": {n: package_version(n) for n in ("torch", "transformers", "trl")},
        "config": {**asdict(cfg), "out_dir": str(cfg.out_dir)},
        "parts": {},
    }
    for name in cfg.parts:
        logger.info("gpu check: %s on %s", name, device)
        _reset_peak()
        begin = time.perf_counter()
        entry: dict[str, Any]
        try:
            result = PARTS[name](device, cfg)
        except NotRunnableError as err:
            entry = {"status": "not runnable", "error": str(err)}
        except Exception as err:
            logger.exception("gpu check: %s crashed", name)
            entry = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
        else:
            entry = {"status": "ok" if result["ok"] else "failed", "result": result}
        entry["seconds"] = round(time.perf_counter() - begin, 1)
        entry["peak_gib"] = None if name == "demo" else round(_peak_gib(), 3)
        logger.info("gpu check: %s %s in %.1f s", name, entry["status"], entry["seconds"])
        report["parts"][name] = entry
    return report


def _describe(device: str) -> dict[str, Any]:
    """The device's name, total memory and CUDA version (as torch reports them)."""
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "device": device,
        "name": props.name,
        "memory_gib": round(props.total_memory / 2**30, 1),
        "cuda": torch.version.cuda,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point: 2 without a CUDA device, 1 when a part failed, 0 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check.json"))
    parser.add_argument("--demo-budget-s", type=float, default=CheckConfig.demo_budget_s)
    parser.add_argument("--layer3-steps", type=int, default=CheckConfig.layer3_steps)
    parser.add_argument("--e2e-steps", type=int, default=CheckConfig.e2e_steps)
    args = parser.parse_args(argv)
    if min(args.layer3_steps, args.e2e_steps) < 1 or args.demo_budget_s <= 0:
        parser.error("--layer3-steps and --e2e-steps must be >= 1, --demo-budget-s > 0")
    command = shlex.join(["python", "-m", "parity.curves.gpu_check", *(argv or sys.argv[1:])])
    try:
        device = pick_device()
    except NoCudaError as err:
        parser.exit(2, f"{parser.prog}: {err}\n")
    sys.stdout.write(f"{command}\n")
    cfg = CheckConfig(
        parts=tuple(args.parts),
        out_dir=args.out.parent / "gpu_check",
        demo_budget_s=args.demo_budget_s,
        layer3_steps=args.layer3_steps,
        e2e_steps=args.e2e_steps,
    )
    report = {"command": command, **check(cfg, device)}
    write_json(args.out, report)
    for name, entry in report["parts"].items():
        sys.stdout.write(f"{name}: {entry['status']} ({entry['seconds']} s)\n")
    sys.stdout.write(f"report: {args.out}\n")
    return 1 if any(e["status"] == "failed" for e in report["parts"].values()) else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
