"""A CPU test harness for verl's real V1 trainer. A test harness, not a way to train.

verl 0.9 has no CPU path: no CPU platform, rollout only through vLLM / SGLang / TensorRT-LLM,
NCCL process groups, flash attention by default. This package fills exactly those gaps, so
that `parity.e2e.verl` can run ``recipes/train_verl.py``'s launch path (`run_ppo` with
`TaskRunnerV1`, `xpgym.adapters.verl.XpgymAgentLoop` as the agent loop) for a few optimizer
steps of a tiny model on a CPU-only CI machine. Nothing here is fast or meant for real runs.

What it adds, all through verl's public registries and environment variables:

- `parity.e2e.verl_cpu.platform`: a ``cpu`` platform in ``PlatformRegistry`` (device ``cpu``,
  backend gloo, Ray resource ``GPU`` provided as one logical Ray GPU), selected with
  ``VERL_PLATFORM=cpu`` and imported into every verl process with
  ``VERL_USE_EXTERNAL_MODULES``;
- `parity.e2e.verl_cpu.rollout`: a rollout replica (``RolloutReplicaRegistry``) whose server is a
  Ray actor over ``transformers`` generation, with the trainer's weights pushed to it after
  every step (verl's ``naive`` checkpoint-engine path);
- `parity.e2e.verl_cpu.launch`: the overrides (gloo, FSDP2 in float32, sdpa, TransferQueue
  sized for two cores, ...), the environment, and the subprocess entry point that calls
  verl's ``run_ppo``.

Three things have no registry and are patched, each where it is done
(`parity.e2e.verl_cpu.platform`, `parity.e2e.verl_cpu.rollout`): verl's process-group backend string
``cpu:gloo,cpu:gloo`` becomes ``gloo``; the ``hf_cpu`` entry of verl's in-worker rollout
table; verl's patch of TRL's value-head model is skipped (TRL 1.x removed that class).

It is tested with exactly the versions in `PINS`; `check_versions` refuses any other (a
mismatch fails with a message, never a hang).
"""

from __future__ import annotations

from parity.shared.trainer_code import package_version

__all__ = ["PINS", "REPORT_DIR_ENV", "ROLLOUT_NAME", "check_versions"]

REPORT_DIR_ENV = "PARITY_VERL_CPU_DIR"
"""Environment variable naming the directory the rollout server writes ``weights.json`` to."""

ROLLOUT_NAME = "hf_cpu"
"""``actor_rollout_ref.rollout.name`` of `parity.e2e.verl_cpu.rollout`'s replica."""

PINS: dict[str, str] = {"verl": "0.9.1", "transferqueue": "0.1.11", "ray": "2.60.0"}
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
            "parity.e2e.verl_cpu is a test harness pinned to exact versions; install "
            + ", ".join(wrong)
            + " (scripts/setup.sh installs them)"
        )
    return found
