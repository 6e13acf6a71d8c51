"""Test harness (not a way to train): the vLLM worker extension of the run, named by
`parity.e2e.oat_cpu.patches.WORKER_EXTENSION`. vLLM imports this module in its worker
process, which applies the worker-side patches there: Oat's ``WorkerWrap`` (``oat/utils/
distributed.py:123-177``), its process group created with torch's current argument name
(`parity.e2e.oat_cpu.patches.pg_options_renamed`) and its ``update_weight`` replaced by
`parity.e2e.oat_cpu.patches.reload_on_sync`; Oat's ``init_process_group`` runs as it is
and keeps its group (`parity.e2e.oat_cpu.patches.group_kept_in_worker`).
"""

from __future__ import annotations

from oat.utils import distributed

from parity.e2e.oat_cpu.patches import group_kept_in_worker, pg_options_renamed, reload_on_sync

__all__ = ["WorkerWrap"]

pg_options_renamed(distributed)


class WorkerWrap(distributed.WorkerWrap):  # type: ignore[misc]
    """Oat's ``WorkerWrap`` with `group_kept_in_worker` and `reload_on_sync`."""


group_kept_in_worker(WorkerWrap)
reload_on_sync(WorkerWrap)
