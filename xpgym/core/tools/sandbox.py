"""Deprecated: the sandbox moved to the package `xpgym.core.sandbox`.

It is an execution substrate (code, terminal and reasoning-gym envs use it, as does
`PythonTool`), not a tool. Each public name still works here and warns with
`DeprecationWarning` when used.
"""

from xpgym.core import sandbox as _new_home
from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(__name__, dict.fromkeys(_new_home.__all__, _new_home.__name__))
