"""Vector envs: step many sub-envs as one batch, with Gymnasium 1.x autoreset semantics.

Four backends, one API (`VectorEnv`), one module each over the shared `base`:

* `SyncVectorEnv` (``sync.py``): the calling thread, lowest overhead for cheap envs;
* `ThreadVectorEnv` (``threaded.py``): threads, for I/O-bound envs (tools, HTTP,
  subprocesses);
* `ProcessVectorEnv` (``process.py``): worker processes, for CPU-bound envs;
* `RayVectorEnv` (``ray_backend.py``): Ray actors, for envs spread over a Ray cluster
  (extra ``xpgym[ray]``).

Semantics (autoreset modes, partial stepping, failure isolation, seeds) are documented in
`xpgym.core.vector.base`, and are the same for every backend. The thread backend, and each
worker process or Ray actor, step their sub-envs on a `WorkSharingPool` (``pool.py``): cheap
steps run one after another in one thread, steps that block wait all at once.

`xpgym.make_vec` picks the backend by ``vectorization_mode`` (`VECTORIZATION_MODES`). The
names differ from Gymnasium's where the backends differ: Gymnasium has no thread backend,
and its ``"async"`` runs sub-envs in subprocesses. So xpgym has no ``"async"``: asking for
it raises `ValueError` naming ``"thread"`` and ``"process"``.

=============  ==================  ==================  ===================================
mode           backend             sub-envs run in     the same backend in Gymnasium
=============  ==================  ==================  ===================================
``"sync"``     `SyncVectorEnv`     the calling thread  ``"sync"`` (``SyncVectorEnv``)
``"thread"``   `ThreadVectorEnv`   a thread pool       none
``"process"``  `ProcessVectorEnv`  worker processes    ``"async"`` (``AsyncVectorEnv``)
``"ray"``      `RayVectorEnv`      Ray actors          none
=============  ==================  ==================  ===================================
"""

from __future__ import annotations

from xpgym.core.vector.base import AutoresetMode, SubEnvError, VectorEnv, derive_seeds
from xpgym.core.vector.process import ProcessVectorEnv
from xpgym.core.vector.ray_backend import RayVectorEnv
from xpgym.core.vector.sync import SyncVectorEnv
from xpgym.core.vector.threaded import ThreadVectorEnv

__all__ = [
    "VECTORIZATION_MODES",
    "AutoresetMode",
    "ProcessVectorEnv",
    "RayVectorEnv",
    "SubEnvError",
    "SyncVectorEnv",
    "ThreadVectorEnv",
    "VectorEnv",
    "derive_seeds",
    "vector_env_class",
]

VECTORIZATION_MODES: dict[str, type[VectorEnv]] = {
    "sync": SyncVectorEnv,
    "thread": ThreadVectorEnv,
    "process": ProcessVectorEnv,
    "ray": RayVectorEnv,
}
"""``vectorization_mode`` -> the backend it selects (see the table above)."""


def vector_env_class(vectorization_mode: str) -> type[VectorEnv]:
    """The backend class `vectorization_mode` selects, e.g. ``"thread"`` -> `ThreadVectorEnv`.

    Raises:
        ValueError: `vectorization_mode` is not a key of `VECTORIZATION_MODES`; for
            ``"async"`` the message says which of ``"thread"`` and ``"process"`` is which.
    """
    if vectorization_mode == "async":
        raise ValueError(
            'vectorization_mode="async" is ambiguous: Gymnasium\'s "async" runs sub-envs in '
            'subprocesses, which is xpgym\'s "process"; use "thread" for a thread pool '
            '(I/O-bound envs) or "process" for worker processes (CPU-bound envs)'
        )
    if vectorization_mode not in VECTORIZATION_MODES:
        raise ValueError(
            f"vectorization_mode must be one of {sorted(VECTORIZATION_MODES)}, "
            f"got {vectorization_mode!r}"
        )
    return VECTORIZATION_MODES[vectorization_mode]
