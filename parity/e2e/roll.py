"""ROLL end to end: what exists, said plainly. ROLL (alibaba/ROLL) is git only.

What has run of ROLL's own code: layer 3 (`parity.update.roll`: ``ActorWorker.loss_func``,
its advantage functions and an AdamW step, on xpgym's rows, where a checkout imports).
What has not: ROLL's own training loop. ``recipes/train_roll.py`` launches it
(``examples/start_agentic_pipeline.py``: ``AgenticPipeline(config).run()``), but that
pipeline places its workers with Ray's ``ResourceManager`` on GPUs (``num_gpus_per_node``)
and generates through its vLLM or SGLang strategy; no CPU harness for it is written here
(as `parity.e2e.verl_cpu` and `parity.e2e.openrlhf_cpu` are for verl and OpenRLHF), so
`run_roll` raises `NotRunnableError` with the reason in both cases. It is not in
`parity.e2e.runs.TRAINERS`, whose runs must train.

    python -m parity.e2e.roll     # exits 2 with the reason
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig
from parity.shared.trainer_code import ROLL_NOT_IMPORTABLE, NotRunnableError, roll_importable

__all__ = ["NO_LOOP", "run_roll"]

logger = logging.getLogger(__name__)

NO_LOOP = (
    "ROLL's own agentic loop (AgenticPipeline.run) is not built here: it places its workers "
    "through Ray's ResourceManager on GPUs and generates with its vLLM/SGLang strategies, and "
    "no CPU harness for it exists; what runs of ROLL is layer 3's update code "
    "(python -m parity.update --trainers roll)"
)
"""Why `run_roll` cannot run where ROLL imports."""


def run_roll(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """ROLL's own loop for ``cfg.steps`` steps: not built (module docstring).

    Raises:
        NotRunnableError: always: `ROLL_NOT_IMPORTABLE` without a checkout, `NO_LOOP` with one.
    """
    if not roll_importable():
        raise NotRunnableError(ROLL_NOT_IMPORTABLE)
    raise NotRunnableError(NO_LOOP)


def main() -> int:
    """``python -m parity.e2e.roll``: logs why ROLL's loop does not run here; returns 2."""
    try:
        run_roll(E2EConfig(), Path("results/parity_e2e"), Path("unused"))
    except NotRunnableError as err:
        logger.error("roll: not runnable: %s", err)
    return 2


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
