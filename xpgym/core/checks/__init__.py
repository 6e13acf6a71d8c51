"""Conformance checks any env can be handed, like Gymnasium's ``check_env`` and
PettingZoo's ``api_test``.

* `check_env` (``single_agent.py``): an `Env` follows the contract of `xpgym.core.env`.
* `check_multiagent_env` (``multiagent.py``): a `MultiAgentEnv` follows the contract of
  `xpgym.core.multiagent`.

Both raise a `CheckError` (an `AssertionError`; `MultiAgentCheckError` is one) naming the
env and what broke. What they share (comparing transcripts and snapshots exactly, reporting
the first difference, the raise and ``close()`` checks) lives in ``common.py``.
"""

from xpgym.core.checks.common import CheckError
from xpgym.core.checks.multiagent import MultiAgentCheckError, check_multiagent_env
from xpgym.core.checks.single_agent import check_env

__all__ = ["CheckError", "MultiAgentCheckError", "check_env", "check_multiagent_env"]
