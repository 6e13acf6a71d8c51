"""Deprecated path: `check_multiagent_env` and `MultiAgentCheckError` moved to
`xpgym.core.checks`. Each still resolves here, with a `DeprecationWarning`."""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    {name: "xpgym.core.checks" for name in ("MultiAgentCheckError", "check_multiagent_env")},
)
