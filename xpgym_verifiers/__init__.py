"""The verifiers plugin of xpgym: ``--env.taskset.id xpgym_verifiers``.

verifiers 0.4 loads a taskset (and the env and harness that come with it) by the name of an
installed top-level package exporting their classes in ``__all__``; this package is that
name for `xpgym.compat.verifiers`, where the classes live and are documented.
"""

from xpgym.compat.verifiers import XpgymChatHarness, XpgymEnv, XpgymTaskset

__all__ = ["XpgymChatHarness", "XpgymEnv", "XpgymTaskset"]
