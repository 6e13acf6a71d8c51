"""The env side and the shared records: the env contract, registry, vector envs, wrappers,
tools, sandbox, multi-agent envs, rewards, chat vocabulary and trajectories.

`xpgym.core` imports no other xpgym package (the rollout loop is `xpgym.rollout`, the RL math
`xpgym.training`), and nothing in it imports a trainer, torch, transformers or datasets at
module level.
"""
