"""Bridges between xpgym and the ecosystem's APIs, each checked by that ecosystem's checker.

* `xpgym.compat.gymnasium`: an xpgym `Env` as a `gymnasium.Env` (and back); importing it
  registers every xpgym id as ``"xpgym/<id>"`` for `gymnasium.make`.
* `xpgym.compat.pettingzoo`: an xpgym `MultiAgentEnv` as a PettingZoo `AECEnv` (sequential
  mode) or `ParallelEnv` (parallel mode).
* `xpgym.compat.common`: what both share (the text spaces, making the env from an id).

Nothing here is imported by ``import xpgym``; gymnasium and pettingzoo are imported only by
the module that bridges to them (``pip install "xpgym[compat]"`` installs both).
"""
