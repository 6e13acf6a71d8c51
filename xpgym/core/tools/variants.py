"""Deprecated: tool variants moved to `xpgym.core.wrappers.tool_variants`.

Kept so that old imports and env specs whose entry point is the string
``"xpgym.core.tools.variants:make_tool_env"`` keep working; each name warns with
`DeprecationWarning` when used. The new home is named, not imported, so that the tools
package does not import the wrappers.
"""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        ("ToolsFactory", "make_tool_env", "register_tool_variant", "tool_variant_id"),
        "xpgym.core.wrappers.tool_variants",
    ),
)
