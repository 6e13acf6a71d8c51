"""Bridges between xpgym and the ecosystem's APIs, each checked by that ecosystem's checker.

* `xpgym.compat.gymnasium`: an xpgym `Env` as a `gymnasium.Env` (and back); importing it
  registers every xpgym id as ``"xpgym/<id>"`` for `gymnasium.make`.
* `xpgym.compat.pettingzoo`: an xpgym `MultiAgentEnv` as a PettingZoo `AECEnv` (sequential
  mode) or `ParallelEnv` (parallel mode).
* `xpgym.compat.verifiers`: an xpgym `Env` as a verifiers 0.4 environment
  (`load_environment`), played by verifiers' own rollouts (docs/interop.md).
* `xpgym.compat.common`: what the bridges share (the text spaces, making the env from an id).

Nothing here is imported by ``import xpgym``; gymnasium, pettingzoo and verifiers are imported
only by the module that bridges to them (``pip install "xpgym[compat]"`` installs the first two;
verifiers needs a venv of its own, see `xpgym.compat.verifiers`).
"""
