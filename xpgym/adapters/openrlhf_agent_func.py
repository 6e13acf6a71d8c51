"""The file to pass as OpenRLHF's ``--train.agent_func_path``: it exposes xpgym's executor.

OpenRLHF loads this file by path and calls ``AgentExecutor()``; see
`xpgym.adapters.openrlhf.AgentExecutor`.
"""

from __future__ import annotations

from xpgym.adapters.openrlhf import AgentExecutor

__all__ = ["AgentExecutor"]
