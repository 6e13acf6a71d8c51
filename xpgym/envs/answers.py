"""Deprecated: moved to `xpgym.envs.common.answers`."""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(__name__, {"last_tagged": "xpgym.envs.common.answers"})
