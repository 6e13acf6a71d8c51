"""Deprecated: tool variants moved to `xpgym.core.wrappers.tool_variants`.

Kept so that old imports and env specs whose entry point is the string
``"xpgym.core.tools.variants:make_tool_env"`` keep working; each name warns with
`DeprecationWarning` when used.
"""

from xpgym.core.deprecation import moved_names
from xpgym.core.wrappers import tool_variants as _new_home

__getattr__ = moved_names(__name__, dict.fromkeys(_new_home.__all__, _new_home.__name__))
