"""Code that runs inside the reasoning-gym scoring sandbox, not in the host process.

`xpgym.envs.reasoning_gym.scoring` binds this directory read-only into its `Sandbox` and
imports ``xpgym_rg_scorer`` there as a top-level module. Never import that module in the
host: it replaces ``cellpylib`` in `sys.modules` (see its docstring).
"""
