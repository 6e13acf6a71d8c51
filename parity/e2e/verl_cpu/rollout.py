"""Test harness (not a way to train): an HF-generate rollout for verl's agent loop on CPU.

verl's agent loop asks a rollout replica's server actor for
``generate(request_id=, prompt_ids=, sampling_params=)`` and reads a ``TokenOutput``. verl
ships servers for vLLM, SGLang and TensorRT-LLM only; this module registers a fourth,
``hf_cpu``:

- `HFRolloutServer`: a Ray actor over `xpgym.rollout.policies.hf.HFPolicy` (``transformers``
  generation, sampler log-probs of ``log_softmax(logits / temperature)``), one request at a
  time. Every output's ``extra_fields["global_steps"]`` is the trainer step whose weights it
  holds, as verl's servers report it.
- `HFRolloutAdapter`: the rollout object verl builds inside its trainer worker; verl's
  ``naive`` checkpoint engine hands it the trainer's full weights after every step, and it
  pushes them to the server (so the sampler is the policy being trained).
- `HFReplica`: the ``RolloutReplica`` that starts the server.

The server also writes ``rollout.json`` to ``$PARITY_VERL_CPU_DIR`` after every call: which
parameter tensors differ from the checkpoint the run started from (``changed``), and how many
tokens it sampled with the weights of each trainer step (``tokens_by_step``; the batch of
step ``k`` is sampled with the weights of step ``k - 1``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput

from parity.e2e.verl_cpu import REPORT_DIR_ENV, ROLLOUT_NAME
from xpgym.rollout.policies.hf import HFPolicy

TIMEOUT_S = 120.0
"""Longest wait for the server actor to start, be found, or take a weight update."""


def server_name(replica_rank: int) -> str:
    """The Ray actor name of replica `replica_rank`'s server."""
    return f"parity_verl_cpu_hf_server_{replica_rank}"


@ray.remote(num_cpus=0)
class HFRolloutServer:
    """One replica's generation server (see the module docstring).

    Args:
        model_path: The ``save_pretrained`` directory of the start model and tokenizer.
        report_dir: Where ``rollout.json`` goes; None: no report.
    """

    def __init__(self, model_path: str, report_dir: str | None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, attn_implementation="sdpa", dtype=torch.float32
        ).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.start = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        self.report = Path(report_dir) / "rollout.json" if report_dir else None
        self.global_steps: int | None = None
        self.changed = dict.fromkeys(self.start, False)
        self.tokens_by_step: dict[str, int] = {}
        self.calls = 0
        self.lock = asyncio.Lock()

    def ready(self) -> bool:
        """True once the model is loaded."""
        return True

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        **kwargs: Any,
    ) -> TokenOutput:
        """Sample a continuation of `prompt_ids` with verl's `sampling_params`
        (``max_tokens``, ``temperature``, ``top_p``, ``top_k``; -1 = off)."""
        policy = HFPolicy(
            self.model,
            self.tokenizer,
            max_new_tokens=int(sampling_params["max_tokens"]),
            temperature=float(sampling_params.get("temperature", 1.0)),
            top_p=float(sampling_params.get("top_p", 1.0)),
            top_k=max(int(sampling_params.get("top_k", -1)), 0),
            seed=self.calls,
        )
        self.calls += 1
        async with self.lock:
            (generation,) = await asyncio.to_thread(policy.generate, [list(prompt_ids)])
            step = str(self.global_steps)
            self.tokens_by_step[step] = self.tokens_by_step.get(step, 0) + len(generation.token_ids)
            self._write_report()
        return TokenOutput(
            token_ids=list(generation.token_ids or []),
            log_probs=generation.logprobs,
            stop_reason="completed",
            num_preempted=0,
            extra_fields={"global_steps": self.global_steps},
        )

    async def update_weights(self, weights: dict[str, torch.Tensor], global_steps: int) -> None:
        """Load the trainer's `weights` (HF names; tied weights may be missing)."""
        async with self.lock:
            result = self.model.load_state_dict(weights, strict=False)
            tied = set(getattr(self.model, "_tied_weights_keys", None) or ["lm_head.weight"])
            if result.unexpected_keys or set(result.missing_keys) - tied:
                raise ValueError(
                    f"weight sync does not match the rollout model: missing "
                    f"{result.missing_keys}, unexpected {result.unexpected_keys}"
                )
            self.global_steps = global_steps
            now = self.model.state_dict()
            self.changed = {k: not torch.equal(now[k], v) for k, v in self.start.items()}
            self._write_report()

    def _write_report(self) -> None:
        if self.report is not None:
            report = {"changed": self.changed, "tokens_by_step": self.tokens_by_step}
            self.report.write_text(json.dumps(report))

    # Replica control calls verl makes on every server; nothing to do for this server.
    async def wake_up(self) -> None: ...
    async def sleep(self) -> None: ...
    async def clear_kv_cache(self) -> None: ...
    async def release_kv_cache(self) -> None: ...
    async def resume_kv_cache(self) -> None: ...
    async def abort_all_requests(self, reject_request: bool = False) -> None: ...
    async def resume_generation(self) -> None: ...
    async def start_profile(self, **kwargs: Any) -> None: ...
    async def stop_profile(self) -> None: ...


async def _wait(what: str, awaitable: Any) -> Any:
    """`awaitable`'s result, or TimeoutError naming `what` after `TIMEOUT_S`."""
    try:
        return await asyncio.wait_for(awaitable, TIMEOUT_S)
    except asyncio.TimeoutError as error:  # not the builtin TimeoutError before Python 3.11
        raise TimeoutError(f"parity.e2e.verl_cpu: no {what} within {TIMEOUT_S:.0f} s") from error


class HFRolloutAdapter(BaseRollout):
    """The rollout verl builds in its trainer worker: forwards weight syncs to the server."""

    async def resume(self, tags: list[str]) -> None:
        """Weights and cache stay in memory: nothing to resume."""

    async def release(self) -> None:
        """Weights and cache stay in memory: nothing to release."""

    async def update_weights(
        self,
        weights: Iterable[tuple[str, torch.Tensor]],
        wire_format: str = "named_tensors",
        **kwargs: Any,
    ) -> None:
        """Send the full `weights` and ``global_steps`` to replica 0's server (this harness
        runs one trainer rank and one replica)."""
        if wire_format != "named_tensors":
            raise ValueError(f"the hf_cpu rollout takes named_tensors, not {wire_format!r}")
        state = {name: tensor.detach().to("cpu").clone() for name, tensor in weights}
        server = await _wait(f"Ray actor {server_name(0)!r}", _find_actor(server_name(0)))
        await _wait(
            "weight update of the hf_cpu rollout server",
            server.update_weights.remote(state, kwargs.get("global_steps")),
        )


async def _find_actor(name: str) -> Any:
    """The named Ray actor, polled until it exists (the caller bounds the wait)."""
    while True:
        try:
            return ray.get_actor(name)
        except ValueError:
            await asyncio.sleep(0.2)


class HFReplica(RolloutReplica):
    """A rollout replica served by one `HFRolloutServer` (hybrid mode, one trainer rank)."""

    async def launch_servers(self) -> None:
        """Start the server actor and wait until its model is loaded."""
        name = server_name(self.replica_rank)
        server = HFRolloutServer.options(name=name).remote(
            str(self.model_config.path), os.environ.get(REPORT_DIR_ENV)
        )
        await _wait(f"start of the hf_cpu rollout server {name!r}", server.ready.remote())
        self.servers = [server]
        self._server_handle = server
        self._server_address = name


def register() -> None:
    """Register the ``hf_cpu`` rollout with verl (replica and in-worker rollout class)."""
    RolloutReplicaRegistry.register(ROLLOUT_NAME, lambda: HFReplica)
    # verl's in-worker rollout classes are looked up in this table (no public registry).
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.HFRolloutAdapter"
