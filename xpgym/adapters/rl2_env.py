"""The file to pass as RL2's ``rollout.env_path``: xpgym's env module (RL2 0.0.2 API).

RL2 loads this file by path and calls ``reset(extra_info)`` and
``step(state_text, action_text, extra_info)``; see `xpgym.adapters.rl2`.
"""

from __future__ import annotations

from xpgym.adapters.rl2 import reset, step

__all__ = ["reset", "step"]
