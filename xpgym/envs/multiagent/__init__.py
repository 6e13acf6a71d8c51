"""Multi-agent language games (`MultiAgentEnv`). Ids: ``multiagent:<Name>-v0``.

Each game is one module whose docstring gives its rules, rewards and action format:

* `xpgym.envs.multiagent.tic_tac_toe` (sequential): `TicTacToeEnv`, agents ``"x"`` and ``"o"``.
* `xpgym.envs.multiagent.rock_paper_scissors` (parallel): `RockPaperScissorsEnv`, iterated
  Rock-Paper-Scissors over N rounds, agents ``"player_0"`` and ``"player_1"``.
* `xpgym.envs.multiagent.customer_service` (sequential): `CustomerServiceEnv`, a
  tau-bench-style retail customer-service task, agents ``"user"`` and ``"assistant"``; its
  single-agent view `CustomerServiceAssistantEnv` is ``agent:CustomerService-v0``.

This package imports no env module; the ids are registered with string entry points.
"""

from __future__ import annotations

from xpgym.core.registry import register


def register_envs() -> None:
    """Register the multi-agent ids; entry points are imported only by `xpgym.make`."""
    register(
        "multiagent:TicTacToe-v0",
        "xpgym.envs.multiagent.tic_tac_toe:TicTacToeEnv",
        description="Two agents (x, o) alternate \\boxed{row col} moves on a 3x3 board; "
        "an illegal move forfeits.",
    )
    register(
        "multiagent:RockPaperScissors-v0",
        "xpgym.envs.multiagent.rock_paper_scissors:RockPaperScissorsEnv",
        rounds=5,
        description="Two agents play simultaneous Rock-Paper-Scissors for 5 rounds; "
        "+1/0/-1 per round.",
    )
    register(
        "multiagent:CustomerService-v0",
        "xpgym.envs.multiagent.customer_service:CustomerServiceEnv",
        description="A user and a store assistant with order tools and a policy "
        "(tau-bench retail style); success = goal database reached.",
    )
    register(
        "agent:CustomerService-v0",
        "xpgym.envs.multiagent.customer_service:CustomerServiceAssistantEnv",
        description="The assistant of multiagent:CustomerService-v0 against a scripted user: "
        "tool calls and replies; 1.0 if the goal database is reached.",
    )
