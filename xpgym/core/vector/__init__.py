"""Vector envs: step many sub-envs as one batch, with Gymnasium 1.x autoreset semantics.

Three backends, one API (`VectorEnv`):

* `SyncVectorEnv`: the calling thread, lowest overhead for cheap envs;
* `AsyncVectorEnv`: threads, for I/O-bound envs (tools, HTTP, subprocesses);
* `ProcessVectorEnv`: worker processes, for CPU-bound envs;
* `RayVectorEnv`: Ray actors, for envs spread over a Ray cluster (extra ``xpgym[ray]``).

`xpgym.make_vec` builds any of them from registered ids. Semantics (autoreset modes,
partial stepping, failure isolation, seeds) are documented in `xpgym.core.vector.base`.
"""

from xpgym.core.vector.base import AutoresetMode, SubEnvError, VectorEnv, derive_seeds
from xpgym.core.vector.process import ProcessVectorEnv
from xpgym.core.vector.ray_backend import RayVectorEnv
from xpgym.core.vector.sync import SyncVectorEnv
from xpgym.core.vector.threaded import AsyncVectorEnv

__all__ = [
    "AsyncVectorEnv",
    "AutoresetMode",
    "ProcessVectorEnv",
    "RayVectorEnv",
    "SubEnvError",
    "SyncVectorEnv",
    "VectorEnv",
    "derive_seeds",
]
