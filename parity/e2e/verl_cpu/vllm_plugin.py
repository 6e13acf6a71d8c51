"""Test harness (not a way to train): the plugin module of the ``vllm`` rollout.

verl imports each module named in ``VERL_USE_EXTERNAL_MODULES`` when it is imported
(``verl/__init__.py``), in every one of its processes: driver, TaskRunner, workers, the vLLM
server actor, and the vLLM worker process, which imports verl to load verl's worker extension.
`parity.e2e.verl_cpu.launch.harness_env` names this module there for the ``vllm`` rollout;
importing it installs `parity.e2e.verl_cpu.vllm_sync`'s patches in that process.
"""

from __future__ import annotations

from parity.e2e.verl_cpu.vllm_sync import install

install()
