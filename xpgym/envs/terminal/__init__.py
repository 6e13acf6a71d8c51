"""Shell tasks in a sandboxed workspace: ``terminal:Sample-v0`` and ``terminal:<Task>-v0``.

`xpgym.envs.terminal.env` has the rules, action format and rewards,
`xpgym.envs.terminal.workspace` how files persist across sandboxed commands, and
`xpgym.envs.terminal.tasks` the shipped tasks. Every id works offline.
"""

from __future__ import annotations

from xpgym.core.registry import register

_ENTRY_POINT = "xpgym.envs.terminal.env:TerminalEnv"

# The shipped tasks (`xpgym.envs.terminal.tasks.TASKS`, same order) and their descriptions,
# written here so that registering imports no env module; a test keeps the two in step.
TASK_DESCRIPTIONS: tuple[tuple[str, str], ...] = (
    ("CountErrors", "Count the ERROR lines of a log file (grep)."),
    ("UniqueSorted", "Sort a list of names and drop duplicates (sort)."),
    ("CsvTotals", "Sum a CSV column per group (awk)."),
    ("FixPython", "Fix two bugs in a small Python module so its tests pass."),
    ("Permissions", "Set file permissions (chmod)."),
    ("ArchiveDocs", "Pack a directory into a .tar.gz archive (tar)."),
    ("RenameExtensions", "Rename files by extension in a tree (find, mv)."),
    ("EditConfig", "Edit settings in an INI file in place (sed)."),
    ("ExtractDomains", "Extract, normalise and deduplicate e-mail domains (grep, tr, sort)."),
    ("CleanBuild", "Delete files matching a pattern in a tree, and nothing else (find)."),
)


def register_envs() -> None:
    """Register the terminal ids; the entry point is imported only by `xpgym.make`."""
    register(
        "terminal:Sample-v0",
        _ENTRY_POINT,
        description=f"One of {len(TASK_DESCRIPTIONS)} shell tasks per episode, checked by a "
        "script; 20 turns.",
    )
    for name, description in TASK_DESCRIPTIONS:
        register(
            f"terminal:{name}-v0",
            _ENTRY_POINT,
            task=name,
            description=f"{description} Sandboxed shell; 20 turns.",
        )
