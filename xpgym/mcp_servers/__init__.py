"""MCP servers shipped with xpgym, written with the official MCP Python SDK (``mcp`` 2.x).

* `sqlite_server`: a SQLite database server (``list_tables``, ``describe_table``, read-only
  ``query``, a writable per-session scratch database), runnable as ``python -m
  xpgym.mcp_servers.sqlite_server --db PATH [--transport stdio|http --port N]``, and
  `build_sample_store`, a tiny store database (customers, products, orders, order items)
  for tests and envs.

Connect to them with `xpgym.core.tools.mcp.MCPToolset`. Importing this package imports
nothing from ``mcp``; the server module does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_sample_store"]


def __getattr__(name: str) -> Any:
    if name == "build_sample_store":
        from xpgym.mcp_servers.sqlite_server import build_sample_store

        return build_sample_store
    raise AttributeError(f"module 'xpgym.mcp_servers' has no attribute {name!r}")
