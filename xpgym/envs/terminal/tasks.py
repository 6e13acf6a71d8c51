"""The shipped terminal tasks: set-up files, an instruction, a check and a reference solution.

A check is a Python program run in the final workspace (its working directory) inside the
sandbox by `xpgym.envs.terminal.workspace.run_check`, where files of the workspace cannot
shadow the modules it imports; it passes when it exits with status 0 and fails with a
message (``sys.exit("...")``) otherwise. Checks keep their expected results to themselves
(never in the workspace) and, where they must run the model's code (`FixPython`), run it in
a child process and compare what it prints, so code that exits early or patches the checker
cannot pass. `tests/envs/test_terminal_env.py` runs every reference solution through the env
(the check passes) and checks that doing nothing fails every check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["TASKS", "TerminalTask", "task_by_name"]


@dataclass(frozen=True)
class TerminalTask:
    """One shell task (plain data: picklable; treat its mappings as read-only).

    Attributes:
        name: CamelCase name, used in the env id ``terminal:<name>-v0``.
        instruction: What the model is asked to do.
        files: The workspace at the start: relative path -> text.
        check: Python source run in the final workspace; exit status 0 means solved.
        solution: Shell commands that solve the task, run one per turn.
        modes: File modes other than the default ``0o644``, by path.
    """

    name: str
    instruction: str
    files: Mapping[str, str]
    check: str
    solution: tuple[str, ...]
    modes: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:  # own copies: the caller's dicts may change later
        object.__setattr__(self, "files", dict(self.files))
        object.__setattr__(self, "modes", dict(self.modes))


def _lines_check(path: str, expected: list[str]) -> str:
    """A check that `path` holds exactly the lines `expected` (trailing whitespace and
    trailing empty lines ignored)."""
    return f"""\
import sys
expected = {expected!r}
try:
    with open({path!r}, encoding="utf-8") as f:
        lines = [line.rstrip() for line in f.read().splitlines()]
except (OSError, UnicodeDecodeError) as exc:
    sys.exit(f"cannot read {path}: {{exc}}")
while lines and not lines[-1]:
    lines.pop()
if lines != expected:
    sys.exit(f"{path} holds {{lines[:20]!r}}, expected {{expected!r}}")
"""


def _tree_check(root: str, expected: dict[str, str], others: dict[str, str]) -> str:
    """A check that the regular files under `root` are exactly `expected` and that each file
    of `others` (outside `root`) is still there (path -> text)."""
    return f"""\
import os, sys
for path, text in {others!r}.items():
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{{path}} was changed")
    except OSError:
        sys.exit(f"{{path}} is missing")
expected = {expected!r}
found = {{}}
for directory, _, names in os.walk({root!r}):
    for name in names:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                found[path] = f.read()
if found != expected:
    sys.exit(f"files under {root}: {{sorted(found)}}, expected {{sorted(expected)}} (with "
             "their original contents)")
"""


_APP_LOG = """\
2024-05-01 10:00:01 INFO server started
2024-05-01 10:00:05 INFO request /index
2024-05-01 10:01:17 ERROR database timeout
2024-05-01 10:01:18 WARN retrying query
2024-05-01 10:01:20 ERROR database timeout
2024-05-01 10:02:00 INFO request /about
2024-05-01 10:02:30 DEBUG cache error ignored
2024-05-01 10:03:12 ERROR disk almost full
2024-05-01 10:04:00 INFO request /index
2024-05-01 10:05:45 ERROR worker crashed
2024-05-01 10:05:46 INFO worker restarted
2024-05-01 10:06:00 INFO shutdown
"""

_NAMES = """\
Olivia
Liam
Emma
Noah
Olivia
Ava
Liam
Mia
Emma
Lucas
Ava
"""

_SALES = """\
region,product,amount
north,widget,120
south,gadget,75
east,widget,200
north,gadget,30
west,widget,55
south,widget,25
east,gizmo,40
north,gizmo,15
"""

_CALC = """\
def average(values):
    \"\"\"The arithmetic mean of a non-empty list of numbers.\"\"\"
    return sum(values) // len(values)


def median(values):
    \"\"\"The median of a non-empty list of numbers.\"\"\"
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle] + ordered[middle + 1]) / 2
"""

_TEST_CALC = """\
import unittest

from calc import average, median


class CalcTest(unittest.TestCase):
    def test_average(self):
        self.assertEqual(average([1, 2, 3, 4]), 2.5)

    def test_median_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


if __name__ == "__main__":
    unittest.main()
"""

# Runs calc.py in a child process (so nothing it does can change the verdict) on cases
# that are not in test_calc.py, and compares the printed results.
_CALC_CHECK = """\
import json, subprocess, sys
probe = '''
import importlib.util, json
spec = importlib.util.spec_from_file_location("calc", "calc.py")
calc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calc)
cases = [("average", [1, 2]), ("average", [3]), ("average", [2, 4, 9]),
         ("median", [5, 1, 3]), ("median", [1, 2]), ("median", [10, 40, 20, 30]),
         ("median", [7])]
print(json.dumps([getattr(calc, name)(values) for name, values in cases]))
'''
expected = [1.5, 3, 5, 3, 1.5, 25, 7]
run = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True,
                     timeout=10)
try:
    got = json.loads(run.stdout.strip().splitlines()[-1])
except (IndexError, ValueError):
    sys.exit(f"calc.py did not run: {run.stderr[-500:]}")
if got != expected:
    sys.exit(f"calc.py gives {got}, expected {expected}")
"""

_PERMISSIONS_CHECK = """\
import os, stat, sys
for path in ("deploy.sh", "secret.key"):
    if not os.path.isfile(path) or os.path.islink(path):
        sys.exit(f"{path} is missing or not a regular file")
with open("deploy.sh") as f:
    if f.read() != "#!/bin/sh\\necho deployed\\n":
        sys.exit("deploy.sh was changed")
if not os.stat("deploy.sh").st_mode & stat.S_IXUSR:
    sys.exit("deploy.sh is not executable by its owner")
mode = stat.S_IMODE(os.stat("secret.key").st_mode)
if mode != 0o600:
    sys.exit(f"secret.key has mode {mode:o}, expected 600")
"""

_DOCS = {
    "docs/intro.md": "# Intro\nWelcome.\n",
    "docs/guide/usage.md": "# Usage\nRun it.\n",
    "docs/guide/faq.md": "# FAQ\nAsk away.\n",
}

_ARCHIVE_CHECK = f"""\
import sys, tarfile
expected = {{k: v.encode() for k, v in {_DOCS!r}.items()}}
try:
    with tarfile.open("backup.tar.gz", "r:gz") as tar:
        found = {{m.name.removeprefix("./"): tar.extractfile(m).read()
                 for m in tar.getmembers() if m.isfile()}}
except (OSError, tarfile.TarError, EOFError) as exc:
    sys.exit(f"backup.tar.gz is not a gzipped tar archive: {{exc}}")
if found != expected:
    sys.exit(f"backup.tar.gz holds files {{sorted(found)}}, expected {{sorted(expected)}}")
"""

_CONFIG = """\
[server]
host = 0.0.0.0
port = 8080
debug = true

[database]
port = 5432
debug = true
"""

_CONTACTS = """\
Alice Smith <alice@example.com>
Bob Jones <bob.jones@Mail.org>
Carol White <carol@example.com>
Dan Brown <dan@university.edu>
Eve Black <eve@mail.org>
Frank Green <frank@EXAMPLE.com>
"""

TASKS: tuple[TerminalTask, ...] = (
    TerminalTask(
        name="CountErrors",
        instruction=(
            "Count the lines of app.log that contain the text ERROR (in capitals) and write "
            "just that number to a new file error_count.txt."
        ),
        files={"app.log": _APP_LOG},
        check=_lines_check("error_count.txt", ["4"]),
        solution=("grep -c ERROR app.log > error_count.txt",),
    ),
    TerminalTask(
        name="UniqueSorted",
        instruction=(
            "Write the distinct lines of names.txt, sorted alphabetically, one per line, to a "
            "new file unique_names.txt."
        ),
        files={"names.txt": _NAMES},
        check=_lines_check(
            "unique_names.txt", ["Ava", "Emma", "Liam", "Lucas", "Mia", "Noah", "Olivia"]
        ),
        solution=("sort -u names.txt > unique_names.txt",),
    ),
    TerminalTask(
        name="CsvTotals",
        instruction=(
            "sales.csv has the columns region,product,amount. Write totals.csv with the header "
            "line region,total and then one line region,total per region (the sum of its "
            "amounts), sorted by region name."
        ),
        files={"sales.csv": _SALES},
        check=_lines_check(
            "totals.csv", ["region,total", "east,240", "north,165", "south,100", "west,55"]
        ),
        solution=(
            "{ echo region,total; tail -n +2 sales.csv "
            "| awk -F, '{s[$1] += $3} END {for (r in s) print r \",\" s[r]}' | sort; } "
            "> totals.csv",
        ),
    ),
    TerminalTask(
        name="FixPython",
        instruction=(
            "The unit tests in test_calc.py fail (run python3 -m unittest test_calc). Fix the "
            "bugs in calc.py, not the tests, so that average and median are correct."
        ),
        files={"calc.py": _CALC, "test_calc.py": _TEST_CALC},
        check=_CALC_CHECK,
        solution=(
            "python3 -m unittest test_calc 2>&1 | tail -1",
            "sed -i 's|sum(values) // len(values)|sum(values) / len(values)|; "
            "s|ordered\\[middle + 1\\]|ordered[middle - 1]|' calc.py",
            "python3 -m unittest test_calc 2>&1 | tail -1",
        ),
    ),
    TerminalTask(
        name="Permissions",
        instruction=(
            "Make deploy.sh executable by its owner, and make secret.key readable and "
            "writable by its owner only (mode 600). Do not change the files' contents."
        ),
        files={"deploy.sh": "#!/bin/sh\necho deployed\n", "secret.key": "k3y-0123456789\n"},
        modes={"secret.key": 0o666},
        check=_PERMISSIONS_CHECK,
        solution=("chmod u+x deploy.sh && chmod 600 secret.key",),
    ),
    TerminalTask(
        name="ArchiveDocs",
        instruction=(
            "Create a gzip-compressed tar archive backup.tar.gz of the docs directory: it "
            "must hold every file under docs, with paths starting with docs/."
        ),
        files=_DOCS | {"notes.txt": "not part of the backup\n"},
        check=_ARCHIVE_CHECK,
        solution=("tar -czf backup.tar.gz docs",),
    ),
    TerminalTask(
        name="RenameExtensions",
        instruction=(
            "Rename every file whose name ends in .txt under the notes directory (its "
            "subdirectories too) so that it ends in .md instead. Keep their contents and do "
            "not touch any other file."
        ),
        files={
            "notes/todo.txt": "buy milk\n",
            "notes/ideas.txt": "a gym for agents\n",
            "notes/2024/may.txt": "holiday\n",
            "notes/readme.md": "my notes\n",
            "notes/data.txt.bak": "old\n",
            "other.txt": "outside notes\n",
        },
        check=_tree_check(
            "notes",
            {
                "notes/todo.md": "buy milk\n",
                "notes/ideas.md": "a gym for agents\n",
                "notes/2024/may.md": "holiday\n",
                "notes/readme.md": "my notes\n",
                "notes/data.txt.bak": "old\n",
            },
            others={"other.txt": "outside notes\n"},
        ),
        solution=(
            "find notes -type f -name '*.txt' -exec sh -c 'mv \"$1\" \"${1%.txt}.md\"' _ {} \\;",
        ),
    ),
    TerminalTask(
        name="EditConfig",
        instruction=(
            "In config.ini, change the server's port from 8080 to 9090 and set debug to false "
            "in every section. Leave every other line as it is."
        ),
        files={"config.ini": _CONFIG},
        check=_lines_check(
            "config.ini",
            [
                "[server]",
                "host = 0.0.0.0",
                "port = 9090",
                "debug = false",
                "",
                "[database]",
                "port = 5432",
                "debug = false",
            ],
        ),
        solution=(
            "sed -i 's/^port = 8080$/port = 9090/; s/^debug = true$/debug = false/' config.ini",
        ),
    ),
    TerminalTask(
        name="ExtractDomains",
        instruction=(
            "Write the distinct domains (the part after the @) of the e-mail addresses in "
            "contacts.txt, in lower case, sorted, one per line, to a new file domains.txt."
        ),
        files={"contacts.txt": _CONTACTS},
        check=_lines_check("domains.txt", ["example.com", "mail.org", "university.edu"]),
        solution=(
            "grep -oE '@[A-Za-z0-9.-]+' contacts.txt | cut -c2- | tr 'A-Z' 'a-z' | sort -u "
            "> domains.txt",
        ),
    ),
    TerminalTask(
        name="CleanBuild",
        instruction=(
            "Delete every file whose name ends in .tmp under the build directory (its "
            "subdirectories too) and nothing else."
        ),
        files={
            "build/main.o": "object\n",
            "build/cache.tmp": "x\n",
            "build/lib/util.o": "object\n",
            "build/lib/scratch.tmp": "x\n",
            "build/lib/deep/more.tmp": "x\n",
            "build/keep.tmp.bak": "backup\n",
            "src.tmp": "outside build\n",
        },
        check=_tree_check(
            "build",
            {
                "build/main.o": "object\n",
                "build/lib/util.o": "object\n",
                "build/keep.tmp.bak": "backup\n",
            },
            others={"src.tmp": "outside build\n"},
        ),
        solution=("find build -type f -name '*.tmp' -delete",),
    ),
)
"""Every shipped task, in a fixed order (``terminal:Sample-v0`` draws from these)."""


def task_by_name(name: str) -> TerminalTask:
    """The shipped task called `name`.

    Raises:
        KeyError: no task has that name; the message lists the names.
    """
    for task in TASKS:
        if task.name == name:
            return task
    raise KeyError(f"no terminal task {name!r}; the tasks are {[t.name for t in TASKS]}")
