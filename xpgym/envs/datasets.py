"""Deprecated: moved to `xpgym.envs.common.datasets`."""

from xpgym.core.deprecation import moved_names
from xpgym.envs.common import datasets as _new_home

__getattr__ = moved_names(__name__, dict.fromkeys(_new_home.__all__, _new_home.__name__))
