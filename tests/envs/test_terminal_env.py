"""Terminal env: action parsing, persistent sandboxed workspaces, hostile commands, every
task's reference solution and check, rewards, snapshots, fuzz and check_env."""

from __future__ import annotations

import os
import pickle
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xpgym
from xpgym.core.checks import check_env
from xpgym.core.sandbox import Sandbox, SandboxUnavailableError, default_sandbox
from xpgym.envs import terminal as terminal_package
from xpgym.envs.terminal import workspace as workspace_module
from xpgym.envs.terminal.env import INVALID_REWARD, TerminalEnv, parse_action
from xpgym.envs.terminal.tasks import TASKS, TerminalTask, task_by_name
from xpgym.envs.terminal.workspace import pack_files, run_check, run_command

SCRATCH = TerminalTask(
    name="Scratch",
    instruction="Create done.txt.",
    files={"start.txt": "hello\n"},
    check="import os, sys\nsys.exit(0 if os.path.isfile('done.txt') else 'no done.txt')\n",
    solution=("touch done.txt",),
)


@pytest.fixture(scope="module", autouse=True)
def _sandbox_available() -> None:
    try:
        default_sandbox()
    except SandboxUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no sandbox on this machine: {exc}")


def scratch(**kwargs) -> TerminalEnv:
    env = TerminalEnv(tasks=[SCRATCH], **kwargs)
    env.reset(seed=0)
    return env


def bash(command: str) -> str:
    return f"<bash>{command}</bash>"


def host_processes_named(name: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                found.append(pid)
        except OSError:
            continue
    return found


# -------------------------------------------------------------------------- actions


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("<bash>ls -la</bash>", ("ls -la", False)),
        ("first <bash>a</bash> then <bash>b</bash>", ("a", False)),
        ("<bash>make</bash> and <finish/>", ("make", True)),
        ("<finish /> before <bash>make</bash>", ("make", True)),
        ("<bash>echo '<finish/>'</bash>", ("echo '<finish/>'", False)),
        ("<finish>", (None, True)),
        ("<bash>   </bash>", (None, False)),
        ("<bash>never closed", (None, False)),
        ("ls -la", (None, False)),
    ],
)
def test_parse_action(action, expected):
    assert parse_action(action) == expected


# ------------------------------------------------------------------------ workspace


def test_files_modes_and_symlinks_persist_between_commands():
    env = scratch()
    env.step(bash("mkdir -p d && echo data > d/f && chmod 700 d/f && ln -s d/f link"))
    obs = env.step(bash("cat link; stat -c '%a %F' d/f link"))[0]
    assert obs == "exit code: 0\nstdout:\ndata\n700 regular file\n777 symbolic link"


def test_directory_variables_and_processes_do_not_persist():
    env = scratch()
    name = f"xp{uuid.uuid4().hex[:10]}"  # a process name (comm) holds 15 characters
    env.step(
        bash(
            f"cp $(command -v sleep) {name} && mkdir sub && cd sub && export X=1 && "
            f"(../{name} 100 &)"
        )
    )
    obs = env.step(bash("pwd; echo x${X}x; cat /proc/[0-9]*/comm"))[0]
    stdout = obs.split("stdout:\n", 1)[1].splitlines()
    assert stdout[:2] == ["/tmp", "xx"]
    assert "cat" in stdout  # the listing works ...
    assert name not in stdout  # ... and the sleeper is gone
    assert host_processes_named(name) == []


def test_unreadable_files_and_directories_are_kept_with_their_modes():
    env = scratch()
    env.step(bash("mkdir locked && echo s > locked/f && chmod 000 locked/f && chmod 000 locked"))
    obs = env.step(bash("stat -c %a locked; chmod 700 locked && stat -c %a locked/f"))[0]
    assert obs == "exit code: 0\nstdout:\n0\n0"


def test_long_output_keeps_its_start_and_end():
    env = scratch(max_output_bytes=200)
    obs = env.step(bash("seq 1 100000"))[0]
    lines = obs.splitlines()
    assert lines[:3] == ["exit code: 0", "stdout:", "1"]
    assert lines[-1] == "100000"
    assert any(line.startswith("[... ") and line.endswith(" bytes cut ...]") for line in lines)
    assert len(obs) < 400


def test_command_over_the_time_limit_is_killed():
    env = scratch(command_timeout_s=2)  # ample time to echo first, on a busy machine
    obs, _, _, _, info = env.step(bash("echo started; sleep 30"))
    assert info["timed_out"] is True
    assert "over the 2 s time limit" in obs
    assert "started" in obs


def test_output_flood_is_stopped():
    obs = scratch().step(bash("yes"))[0]
    assert "more than 8 MiB of output" in obs


def test_tools_behind_etc_alternatives_work():
    obs = scratch().step(bash("echo 'a,b' | awk -F, '{print $2}'"))[0]
    assert obs == "exit code: 0\nstdout:\nb"


def test_killing_every_process_loses_only_that_command():
    env = scratch()
    env.step(bash("echo kept > kept.txt"))
    obs, _, _, _, info = env.step(bash("echo lost > lost.txt; kill -9 -1"))
    assert info["exit_code"] is None
    assert "the files are as they were before it" in obs
    assert env.step(bash("ls"))[0] == "exit code: 0\nstdout:\nkept.txt\nstart.txt"


def test_fork_bomb_is_contained():
    env = scratch(command_timeout_s=10)  # the bomb ends on its own well before
    info = env.step(bash(":(){ :|:& };:"))[4]
    assert info["exit_code"] is not None
    assert env.step(bash("echo alive"))[0] == "exit code: 0\nstdout:\nalive"


def test_no_network_and_no_host_files(tmp_path):
    planted = tmp_path / "planted"
    planted.write_text("host data")
    command = (
        f"cat {planted}; ls {Path.cwd()} >/dev/null && echo repo-visible; "
        "rm -rf / 2>/dev/null; (echo > /dev/tcp/1.1.1.1/53) 2>/dev/null || echo no-network"
    )
    obs = scratch().step(bash(command))[0]
    assert "host data" not in obs
    assert "repo-visible" not in obs
    assert "no-network" in obs
    assert planted.read_text() == "host data"


def test_workspace_is_a_small_tmpfs():
    command = "head -c 10000000 /dev/zero > a && head -c 10000000 /dev/zero > b"
    obs = scratch().step(bash(command))[0]
    assert "No space left on device" in obs  # 16 MiB in all (each file is under the cap)


def test_workspace_that_cannot_be_kept_leaves_the_files_as_they_were(monkeypatch):
    monkeypatch.setattr(workspace_module, "ARCHIVE_BYTES", 1 << 20)
    env = scratch()
    obs = env.step(bash("head -c 2000000 /dev/urandom > big; echo wrote"))[0]
    assert obs.startswith("exit code: 0\nstdout:\nwrote\n")
    assert "[the files could not be kept: the workspace is over 1048576 bytes" in obs
    assert env.step(bash("ls"))[0] == "exit code: 0\nstdout:\nstart.txt"


def test_a_failed_sandbox_is_reported_not_raised():
    closed = Sandbox(pool_size=1)
    closed.close()
    env = scratch(sandbox=closed)
    obs, _, _, _, info = env.step(bash("ls"))
    assert info["exit_code"] is None
    assert obs.startswith("[the command failed: the sandbox failed: this Sandbox is closed")


def test_pack_files_is_reproducible_and_rejects_bad_paths():
    files = {"b/c.txt": "c", "a.txt": "a"}
    assert pack_files(files, {"a.txt": 0o600}) == pack_files(
        dict(reversed(files.items())), {"a.txt": 0o600}
    )
    for bad in ("/abs", "../up", ""):
        with pytest.raises(ValueError, match="relative"):
            pack_files({bad: "x"})
    with pytest.raises(ValueError, match="not files"):
        pack_files({"a": "x"}, {"b": 0o600})


@pytest.mark.parametrize(
    ("source", "exit_code", "stderr"),
    [
        ("print('fine')", 0, ""),
        ("import sys\nsys.exit(3)", 3, ""),
        ("import sys\nsys.exit('no file')", 1, "no file\n"),
        ("raise ValueError('bad')", 1, "ValueError: bad\n"),
    ],
)
def test_check_exit_status_follows_python(source, exit_code, stderr):
    result = run_check(default_sandbox(), b"", source)
    assert result.exit_code == exit_code
    assert result.stderr.endswith(stderr)


def test_check_that_blocks_on_a_planted_fifo_times_out():
    workspace = run_command(default_sandbox(), b"", "mkfifo answer.txt").workspace
    result = run_check(default_sandbox(), workspace, "open('answer.txt').read()", timeout_s=1)
    assert (result.timed_out, result.exit_code) == (True, -9)


def test_run_command_on_an_empty_workspace():
    result = run_command(default_sandbox(), b"", "ls -A | wc -l")
    assert (result.exit_code, result.stdout, result.error) == (0, "0\n", None)


# ----------------------------------------------------------------------------- tasks


def test_registered_task_descriptions_match_the_tasks():
    names = [name for name, _ in terminal_package.TASK_DESCRIPTIONS]
    assert names == [task.name for task in TASKS]
    assert len(TASKS) >= 8


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_reference_solution_passes_the_check(task):
    env = xpgym.make(f"terminal:{task.name}-v0")
    obs, info = env.reset(seed=0)
    assert info["task"] == task.name
    assert task.instruction in obs
    for command in task.solution:
        obs, reward, terminated, truncated, _ = env.step(bash(command))
        assert (reward, terminated, truncated) == (0.0, False, False)
        assert obs.startswith("exit code: 0"), obs
    obs, reward, terminated, truncated, info = env.step("<finish/>")
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True), info
    assert obs.endswith("Check: the task is done.")


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_doing_nothing_fails_the_check(task):
    env = TerminalEnv(task=task.name)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("<finish/>")
    assert (reward, terminated, info["correct"]) == (0.0, True, False)
    assert info["check_output"]  # the check says why
    assert obs == "Finished.\n\nEpisode over (finished). Check: the task is not done."


def test_checks_ignore_modules_planted_in_the_workspace():
    env = TerminalEnv(task="ArchiveDocs")
    env.reset(seed=0)
    plant = "raise SystemExit(0)\n"
    env.step(bash(f"for m in tarfile sys os sitecustomize; do echo '{plant}' > $m.py; done"))
    env.step(bash(f"mkdir -p .local/lib && echo '{plant}' > .local/lib/usercustomize.py"))
    assert env.step("<finish/>")[4]["correct"] is False


def test_python_check_runs_the_code_apart_so_an_early_exit_does_not_pass():
    env = TerminalEnv(task="FixPython")
    env.reset(seed=0)
    env.step(bash("printf 'import os\\nos._exit(0)\\n' > calc.py"))
    assert env.step("<finish/>")[4]["correct"] is False


def test_task_by_name_lists_the_tasks_when_unknown():
    assert task_by_name("CsvTotals").name == "CsvTotals"
    with pytest.raises(KeyError, match="CountErrors"):
        task_by_name("Nope")


# --------------------------------------------------------------------- episode rules


def test_invalid_action_is_penalised_and_the_turn_limit_runs_the_check():
    env = scratch(max_turns=2)
    obs, reward, terminated, truncated, info = env.step("let me think")
    assert (reward, terminated, truncated) == (INVALID_REWARD, False, False)
    assert info["invalid_action"] is True
    assert "No command found" in obs
    obs, reward, terminated, truncated, info = env.step(bash("touch done.txt"))
    assert (reward, terminated, truncated, info["correct"]) == (1.0, False, True, True)
    assert obs.endswith("Episode over (out of turns (2)). Check: the task is done.")


def test_command_and_finish_in_one_action_runs_then_checks():
    obs, reward, terminated, _, info = scratch().step("<bash>touch done.txt</bash><finish/>")
    assert (reward, terminated, info["parsed_action"], info["exit_code"]) == (
        1.0,
        True,
        "touch done.txt",
        0,
    )
    assert obs.startswith("exit code: 0\n(no output)")


def test_sample_id_draws_tasks_by_seed_and_options_choose_one():
    env = xpgym.make("terminal:Sample-v0")
    drawn = [env.reset(seed=s)[1]["task"] for s in range(12)]
    assert drawn == [env.reset(seed=s)[1]["task"] for s in range(12)]
    assert len(set(drawn)) > 3
    assert env.reset(options={"task": "CleanBuild"})[1]["task"] == "CleanBuild"
    with pytest.raises(KeyError, match="no task 'Nope'"):
        env.reset(options={"task": "Nope"})


def test_snapshot_restores_the_workspace():
    env = scratch()
    env.step(bash("echo one > f"))
    snapshot = env.get_state()
    env.step(bash("echo two > f"))
    env.set_state(snapshot)
    assert env.step(bash("cat f"))[0] == "exit code: 0\nstdout:\none"
    other = TerminalEnv(tasks=[SCRATCH])
    other.set_state(snapshot)
    assert other.step(bash("cat f"))[0] == "exit code: 0\nstdout:\none"


def test_env_pickles_for_worker_processes():
    env = scratch()
    copy = pickle.loads(pickle.dumps(env))
    assert copy.step(bash("cat start.txt"))[0] == "exit code: 0\nstdout:\nhello"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"task": "Nope"}, KeyError),
        ({"task": "CsvTotals", "tasks": TASKS}, ValueError),
        ({"tasks": []}, ValueError),
        ({"max_turns": 0}, ValueError),
        ({"max_turns": "3"}, TypeError),
        ({"command_timeout_s": 0}, ValueError),
        ({"max_output_bytes": 10}, ValueError),
    ],
)
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        TerminalEnv(**kwargs)


# ---------------------------------------------------------------------- conformance


@settings(max_examples=25, deadline=None)
@given(st.text() | st.builds(bash, st.text()))
def test_any_text_is_a_valid_step(action):
    env = TerminalEnv(tasks=[SCRATCH], max_turns=5, command_timeout_s=2)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    command, finish = parse_action(action)
    assert isinstance(obs, str)
    assert (terminated, truncated) == (finish, False)
    assert info["invalid_action"] is (command is None and not finish)
    assert reward in (0.0, 1.0, INVALID_REWARD)


def test_check_env():
    check_env(xpgym.make("terminal:Sample-v0", max_turns=3), num_episodes=2)
