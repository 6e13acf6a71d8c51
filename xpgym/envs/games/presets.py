"""Deprecated: moved to `xpgym.envs.common.presets`."""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(["override_preset", "resolve_presets"], "xpgym.envs.common.presets"),
)
