"""The env tables are generated from the registry and must not be stale: every id in
docs/envs.md, one row per category with its count in the README."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
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
ENVS_DOC = ROOT / "docs" / "envs.md"
README = ROOT / "README.md"
STALE = f"# t\nintro\n{TABLE_START}\n| old |\n{TABLE_END}\nrest\n"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the script in a fresh interpreter, so ids registered by other tests are absent."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def table_section(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split(TABLE_START)[1].split(TABLE_END)[0].split("\n")


def stale_pair(tmp_path: Path) -> tuple[Path, Path]:
    doc, readme = tmp_path / "envs.md", tmp_path / "README.md"
    doc.write_text(STALE)
    readme.write_text(STALE)
    return doc, readme


def test_env_tables_are_up_to_date():
    done = run_script("--check")
    assert done.returncode == 0, (
        f"{done.stderr}an env table is stale: run python scripts/update_env_table.py"
    )


def test_envs_doc_table_section_equals_the_rendered_table():
    section = [line for line in table_section(ENVS_DOC) if line]
    rendered = render_env_table(env_rows("game:GuessTheNumber-*")).splitlines()
    assert section[:2] == rendered[:2]  # the header
    assert all(row in section for row in rendered[2:])


def test_readme_counts_every_category_of_the_registry():
    code = "import json, xpgym; print(json.dumps(xpgym.list_envs()))"
    listed = subprocess.run(  # a fresh interpreter: only the built-in ids
        [sys.executable, "-c", code], capture_output=True, check=True
    )
    registered = Counter(env_id.partition(":")[0] for env_id in json.loads(listed.stdout))
    counts = {}
    for line in table_section(README):
        match = re.match(r"\| `([a-z_0-9]+):` \| (\d+)", line)
        if match:
            counts[match[1]] = int(match[2])
    assert counts == dict(registered)


def test_readme_keeps_the_full_table_out():
    assert "game:GuessTheNumber-v0-easy" not in "\n".join(table_section(README))


def test_check_mode_exits_1_on_a_stale_table_and_leaves_it(tmp_path):
    doc, readme = stale_pair(tmp_path)
    done = run_script("--check", "--doc", str(doc), "--readme", str(readme))
    assert done.returncode == 1
    assert "stale" in done.stderr
    assert doc.read_text() == STALE
    assert readme.read_text() == STALE


def test_script_rewrites_only_the_tables(tmp_path):
    doc, readme = stale_pair(tmp_path)
    assert run_script("--doc", str(doc), "--readme", str(readme)).returncode == 0
    headers = {doc: "| Id | Description | Entry point |", readme: "| Category | Ids | Envs |"}
    for path, header in headers.items():
        text = path.read_text()
        assert text.startswith(f"# t\nintro\n{TABLE_START}\n{header}\n")
        assert text.endswith(f"\n{TABLE_END}\nrest\n")
        assert "| old |" not in text


def test_script_exits_2_without_markers(tmp_path):
    doc, readme = stale_pair(tmp_path)
    doc.write_text("# no table here\n")
    done = run_script("--check", "--doc", str(doc), "--readme", str(readme))
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
