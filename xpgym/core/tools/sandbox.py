"""Deprecated: the sandbox moved to the package `xpgym.core.sandbox`.

It is an execution substrate (code, terminal and reasoning-gym envs use it, as does
`PythonTool`), not a tool. Each public name still works here and warns with
`DeprecationWarning` when used.
"""

from xpgym.core.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        (
            "DEFAULT_PRELOAD",
            "EXIT_REASONS",
            "UNSAFE_NO_SANDBOX",
            "Sandbox",
            "SandboxError",
            "SandboxLimits",
            "SandboxResult",
            "SandboxUnavailableError",
            "default_sandbox",
        ),
        "xpgym.core.sandbox",
    ),
)
