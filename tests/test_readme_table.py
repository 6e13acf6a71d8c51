"""The README's env table is generated from the registry and must not be stale."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from xpgym.envs.catalogue import (
    DOWNLOAD_NOTE,
    TABLE_END,
    TABLE_START,
    EnvRow,
    env_rows,
    render_env_table,
    replace_env_table,
)

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "update_env_table.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the script in a fresh interpreter, so ids registered by other tests are absent."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_readme_env_table_is_up_to_date():
    done = run_script("--check")
    assert done.returncode == 0, (
        f"{done.stderr}README.md's env table is stale: run python scripts/update_env_table.py"
    )


def test_readme_table_section_equals_the_rendered_table():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(TABLE_START)[1].split(TABLE_END)[0]
    rendered = render_env_table(env_rows("game:GuessTheNumber-*")).strip().splitlines()
    section_lines = section.strip().splitlines()
    assert section_lines[:2] == rendered[:2]  # the header
    assert all(row in section_lines for row in rendered[2:])


def test_check_mode_exits_1_on_a_stale_table_and_leaves_it(tmp_path):
    readme = tmp_path / "README.md"
    stale = f"# t\n{TABLE_START}\n| old |\n{TABLE_END}\nrest\n"
    readme.write_text(stale)
    done = run_script("--check", "--readme", str(readme))
    assert done.returncode == 1
    assert "stale" in done.stderr
    assert readme.read_text() == stale


def test_script_rewrites_only_the_table(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# t\nintro\n{TABLE_START}\n| old |\n{TABLE_END}\nrest\n")
    assert run_script("--readme", str(readme)).returncode == 0
    text = readme.read_text()
    assert text.startswith(f"# t\nintro\n{TABLE_START}\n| Id | Description | Entry point |\n")
    assert text.endswith(f"\n{TABLE_END}\nrest\n")
    assert "| old |" not in text


def test_script_exits_2_without_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    done = run_script("--check", "--readme", str(readme))
    assert done.returncode == 2
    assert "env-table:start" in done.stderr


def test_render_escapes_pipes_in_descriptions():
    table = render_env_table([EnvRow("game:X-v0", "a | b", "m:X", {})])
    assert table.splitlines()[-1] == "| `game:X-v0` | a \\| b | `m:X` |"


def test_render_marks_ids_that_download_data():
    rows = [EnvRow("math:X-v0", "hub set", "m:X", {}, requires_download=True)]
    assert render_env_table(rows).splitlines()[-1] == (
        f"| `math:X-v0` | hub set{DOWNLOAD_NOTE} | `m:X` |"
    )


def test_render_lists_one_row_per_id_under_a_header():
    rows = env_rows("game:GuessTheNumber-*")
    lines = render_env_table(rows).splitlines()
    assert lines[:2] == ["| Id | Description | Entry point |", "| --- | --- | --- |"]
    assert [re.search(r"`([^`]+)`", line)[1] for line in lines[2:]] == [r.id for r in rows]


@pytest.mark.parametrize(
    "text",
    [
        "no markers",
        f"{TABLE_START} only the start",
        f"{TABLE_END} before {TABLE_START}",
        f"{TABLE_START}{TABLE_END}{TABLE_START}{TABLE_END}",
    ],
)
def test_replace_rejects_missing_misordered_or_repeated_markers(text):
    with pytest.raises(ValueError, match="expected one"):
        replace_env_table(text, "table")


def test_replace_is_idempotent():
    once = replace_env_table(f"a\n{TABLE_START}\nx\n{TABLE_END}\nb", "T")
    assert once == f"a\n{TABLE_START}\nT\n{TABLE_END}\nb"
    assert replace_env_table(once, "T") == once
