"""Deprecated path: `check_env`, `check_multiagent_env` and `CheckError` moved to
`xpgym.core.checks`. Each still resolves here, with a `DeprecationWarning`."""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    {name: "xpgym.core.checks" for name in ("CheckError", "check_env", "check_multiagent_env")},
)
