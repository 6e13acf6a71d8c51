"""Tools: the `Tool` contract, the shared call parsers, and the tools.

* `base`: `Tool`, `ToolCall`, `ToolResult` (the contract every tool implements).
* `calls`: parsers for the two call formats (tag style ``<python>...</python>`` and JSON
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``), argument validation and
  instruction text; `parse_call` is a ready-made `Tool.parse`.
* `signature`: JSON schemas inferred from a function's type hints and docstring
  (`signature_schema`).
* `decorator`: ``@tool``, a plain (sync or async) function as a `Tool` (`FunctionTool`),
  stateless, bound to the episode's env (``@tool(env=...)``) or holding a pooled resource
  per episode (``@tool(resource=...)``, `xpgym.core.resources.ResourcePool`).
* Tools: `available_actions.available_actions` (the env's `Env.available_actions` as a tool;
  import it from its module, whose name it shares), `python.PythonTool` (code run in
  `xpgym.core.sandbox.Sandbox`, a bubblewrap sandbox), `search.tool.SearchTool` (local
  tantivy index or a retrieval server over HTTP; the `search` package has a module per
  part), `mcp.MCPToolset` (one `Tool` per function of an MCP server).
* The wrapper that puts tools on an env is `xpgym.core.wrappers.tools.ToolEnvWrapper`; tool
  variants of registered envs (`register_tool_variant`) are in
  `xpgym.core.wrappers.tool_variants`.

Importing this package imports no tool implementation; names listed in `_LAZY` load their
module on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import (
    FunctionCall,
    TagMatch,
    find_fenced_block,
    find_function_calls,
    find_tag,
    format_function_instructions,
    format_tool_instructions,
    function_schema,
    parse_call,
    validate_arguments,
)

__all__ = [
    "FunctionCall",
    "FunctionTool",
    "HTTPSearchBackend",
    "LocalSearchIndex",
    "MCPFunctionTool",
    "MCPToolset",
    "PythonTool",
    "SearchTool",
    "TagMatch",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "find_fenced_block",
    "find_function_calls",
    "find_tag",
    "format_function_instructions",
    "format_tool_instructions",
    "function_schema",
    "make_mcp_tools",
    "make_search_tool",
    "parse_call",
    "signature_schema",
    "tool",
    "validate_arguments",
]

# Name -> module, imported on first attribute access (tool implementations add theirs here).
_LAZY: dict[str, str] = {
    "PythonTool": "xpgym.core.tools.python",
    "SearchTool": "xpgym.core.tools.search.tool",
    "LocalSearchIndex": "xpgym.core.tools.search.index",
    "HTTPSearchBackend": "xpgym.core.tools.search.client",
    "make_search_tool": "xpgym.core.tools.search.tool",
    "MCPToolset": "xpgym.core.tools.mcp",
    "MCPFunctionTool": "xpgym.core.tools.mcp",
    "make_mcp_tools": "xpgym.core.tools.mcp",
    "signature_schema": "xpgym.core.tools.signature",
    "tool": "xpgym.core.tools.decorator",
    "FunctionTool": "xpgym.core.tools.decorator",
    "ToolError": "xpgym.core.tools.decorator",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
