"""Framework-agnostic core: env contract, registry, vector envs, wrappers, multi-agent.

Nothing in `xpgym.core` imports a trainer, torch, transformers or datasets at module level.
"""
