"""`xpgym.core.sandbox`: behaviour, limits, isolation, and hostile programs.

Hostile tests run what a model might write to escape or hurt the host, then check the HOST
afterwards (files, listeners, processes), not only what the program printed. Nothing is
timed: a limit shows in the outcome (the exit reason, the processes that are gone), an
ordering by waiting for a state (`wait_until`); speed lives in
``tests/benchmarks/test_tool_latency.py``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S, wait_until

from xpgym.core import sandbox as sandbox_module
from xpgym.core.sandbox import (
    EXIT_REASONS,
    UNSAFE_NO_SANDBOX,
    Sandbox,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
)
from xpgym.core.sandbox import host as sandbox_host

REPO = Path(__file__).resolve().parents[2]
FAST = SandboxLimits(cpu_seconds=2, wall_timeout_s=10)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    try:
        box = Sandbox(limits=FAST)
    except SandboxUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"no sandbox on this machine: {exc}")
    yield box
    box.close()


@pytest.fixture
def own_sandbox() -> Iterator[Sandbox]:
    """A sandbox of the test's own, for tests that kill it."""
    box = Sandbox(limits=FAST, pool_size=1)
    yield box
    box.close()


def marker() -> str:
    return f"xpgym{uuid.uuid4().hex[:8]}"


def host_processes_with(text: str) -> list[int]:
    """Pids of host processes whose command line or name contains `text`."""
    found = []
    needle = text.encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            comm = Path(f"/proc/{entry.name}/comm").read_bytes()
        except OSError:
            continue
        if needle in cmdline or needle in comm:
            found.append(int(entry.name))
    return found


SECRET = "TOP-SECRET-CONTENT"


@contextlib.contextmanager
def planted(path: Path) -> Iterator[Path]:
    path.write_text(SECRET)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def check(result: SandboxResult) -> SandboxResult:
    assert result.exit_reason in EXIT_REASONS
    return result


# ---------------------------------------------------------------------------------------
# Running programs
# ---------------------------------------------------------------------------------------


def test_python_stdout_stderr_and_exit_code_are_captured(sandbox: Sandbox) -> None:
    code = "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(3)"
    result = check(sandbox.run_python(code))
    assert (result.stdout, result.stderr, result.exit_code) == ("out\n", "err\n", 3)
    assert result.exit_reason == "error"


def test_successful_program_is_ok(sandbox: Sandbox) -> None:
    result = check(sandbox.run_python("print(1)"))
    assert (result.stdout, result.exit_code, result.exit_reason) == ("1\n", 0, "ok")
    assert result.ok
    assert result.duration_s > 0


def test_exception_traceback_looks_like_python_c(sandbox: Sandbox) -> None:
    result = check(sandbox.run_python("x = 1\n1 / 0"))
    assert result.stderr == (
        "Traceback (most recent call last):\n"
        '  File "<string>", line 2, in <module>\n'
        "ZeroDivisionError: division by zero\n"
    )
    assert (result.exit_code, result.exit_reason) == (1, "error")


def test_syntax_error_is_reported(sandbox: Sandbox) -> None:
    result = check(sandbox.run_python("def f(:\n  pass"))
    assert "SyntaxError" in result.stderr
    assert result.exit_code == 1


def test_stdin_is_passed(sandbox: Sandbox) -> None:
    result = sandbox.run_python("print(input()[::-1])", stdin="abc\n")
    assert result.stdout == "cba\n"


def test_no_stdin_reads_eof(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import sys; print(repr(sys.stdin.read()))")
    assert result.stdout == "''\n"


def test_files_are_written_into_the_working_directory(sandbox: Sandbox) -> None:
    files = {"main.py": "import helper\nhelper.hi()\n", "helper.py": "def hi(): print('hi')\n"}
    result = sandbox.run(["python3", "main.py"], files=files)
    assert (result.stdout, result.exit_reason) == ("hi\n", "ok")


def test_run_python_can_import_its_files(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import helper", files={"helper.py": "print('imported')"})
    assert result.stdout == "imported\n"


def test_files_in_subdirectories_and_bytes_content(sandbox: Sandbox) -> None:
    files = {"data/blob.bin": b"\x00\xff", "data/a.txt": "caf\u00e9"}
    code = "print(open('data/blob.bin','rb').read(), open('data/a.txt').read())"
    assert sandbox.run_python(code, files=files).stdout == "b'\\x00\\xff' caf\u00e9\n"


@pytest.mark.parametrize("name", ["/etc/passwd", "../escape.py", "a/../../b", ""])
def test_file_paths_leaving_the_working_directory_are_rejected(sandbox: Sandbox, name: str) -> None:
    with pytest.raises(ValueError, match="relative paths"):
        sandbox.run_python("pass", files={name: "x"})


def test_missing_program_exits_127(sandbox: Sandbox) -> None:
    result = sandbox.run(["no-such-program-xyz"])
    assert result.exit_code == 127
    assert "cannot execute 'no-such-program-xyz'" in result.stderr


def test_child_processes_report_their_exit_status(sandbox: Sandbox) -> None:
    code = "import subprocess\nprint(subprocess.run(['sh', '-c', 'exit 3']).returncode)"
    assert sandbox.run_python(code).stdout == "3\n"


def test_output_is_decoded_with_replacement(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import sys; sys.stdout.buffer.write(b'a\\xffb')")
    assert result.stdout == "a\ufffdb"


def test_output_printed_before_a_timeout_is_kept(sandbox: Sandbox) -> None:
    limits = SandboxLimits(cpu_seconds=5, wall_timeout_s=1)
    result = sandbox.run_python("import time\nprint('before')\ntime.sleep(60)", limits=limits)
    assert (result.stdout, result.exit_reason) == ("before\n", "timeout")


def test_code_runs_once(sandbox: Sandbox) -> None:
    # GEM re-runs code whose stderr says "is not defined"; side effects must happen once.
    code = "print('side effect')\nundefined_name"
    result = sandbox.run_python(code)
    assert result.stdout == "side effect\n"
    assert "NameError" in result.stderr


def test_exit_and_quit_builtins_exist(sandbox: Sandbox) -> None:
    assert sandbox.run_python("print(1); exit(4)").exit_code == 4


def test_non_daemon_threads_and_atexit_run_before_exit(sandbox: Sandbox) -> None:
    code = (
        "import atexit, threading, time\n"
        "atexit.register(lambda: print('atexit'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n"
    )
    assert sandbox.run_python(code).stdout == "thread\natexit\n"


def test_concurrent_calls_from_threads_get_their_own_results(sandbox: Sandbox) -> None:
    results: dict[int, str] = {}

    def work(i: int) -> None:
        for j in range(3):
            out = sandbox.run_python(f"print({i} * 100 + {j})").stdout
            results[i * 100 + j] = out

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {k: f"{k}\n" for k in results}
    assert len(results) == 48


# ---------------------------------------------------------------------------------------
# Limits
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_infinite_loop_hits_the_cpu_limit(sandbox: Sandbox) -> None:
    limits = SandboxLimits(cpu_seconds=1, wall_timeout_s=20)
    result = check(sandbox.run_python("while True: pass", limits=limits))
    assert result.exit_reason == "cpu_limit"  # long before the wall timeout


def test_sleeping_forever_hits_the_wall_timeout(sandbox: Sandbox) -> None:
    limits = SandboxLimits(wall_timeout_s=0.5)
    result = check(sandbox.run_python("import time; time.sleep(1000)", limits=limits))
    assert (result.exit_reason, result.exit_code) == ("timeout", None)


def test_allocating_8_gib_fails_with_memory(sandbox: Sandbox) -> None:
    result = check(sandbox.run_python("x = bytearray(8 << 30)\nprint('allocated')"))
    assert result.exit_reason == "memory"
    assert "allocated" not in result.stdout
    assert sandbox.run_python("print(1)").ok  # the sandbox is fine afterwards


def test_printing_1_gib_is_capped_and_returns_promptly(sandbox: Sandbox) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = (
        "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024): sys.stdout.write(chunk)\n"
        "sys.stderr.write('finished')"
    )
    limits = SandboxLimits(max_output_bytes=64 << 10)
    result = check(sandbox.run_python(code, limits=limits))
    assert result.exit_reason == "output_limit"
    assert result.output_truncated
    assert len(result.stdout) == 64 << 10
    assert "finished" not in result.stderr  # stopped at the cap, not drained to the end
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 100 << 10  # the host never held the flood


def test_stderr_flood_is_capped_too(sandbox: Sandbox) -> None:
    code = "import sys\nwhile True: sys.stderr.write('e' * 4096)"
    result = sandbox.run_python(code, limits=SandboxLimits(max_output_bytes=10_000))
    assert (result.exit_reason, len(result.stderr)) == ("output_limit", 10_000)


def test_process_limit_caps_forks(sandbox: Sandbox) -> None:
    code = (
        "import os, time\nn = 0\n"
        "try:\n"
        "    for _ in range(100):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as exc:\n"
        "    print(n, exc.errno)\n"
    )
    result = sandbox.run_python(code, limits=SandboxLimits(max_processes=5, wall_timeout_s=10))
    assert result.stdout == "4 11\n"  # itself + 4 children = 5; then EAGAIN


def test_file_size_limit_stops_big_files(sandbox: Sandbox) -> None:
    code = (
        "try:\n"
        "    open('big', 'wb').write(b'x' * (2 << 20))\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    result = sandbox.run_python(code, limits=SandboxLimits(file_size_bytes=1 << 20))
    assert result.stdout == "27\n"  # EFBIG


def test_tmp_size_limit_stops_filling_the_disk(sandbox: Sandbox) -> None:
    code = (
        "try:\n"
        "    for i in range(100): open(f'f{i}', 'wb').write(b'x' * (1 << 20))\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    result = sandbox.run_python(code, limits=SandboxLimits(tmp_size_bytes=8 << 20))
    assert result.stdout == "28\n"  # ENOSPC


def test_open_files_limit(sandbox: Sandbox) -> None:
    code = (
        "import resource\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE))\n"
        "fs = []\n"
        "try:\n"
        "    while True: fs.append(open('/dev/null'))\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    result = sandbox.run_python(code, limits=SandboxLimits(max_open_files=32))
    assert result.stdout == "(32, 32)\n24\n"  # EMFILE


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="cpu_seconds must be a positive number"):
        SandboxLimits(cpu_seconds=0)


# ---------------------------------------------------------------------------------------
# Hostile programs: network
# ---------------------------------------------------------------------------------------


def test_cannot_connect_to_a_host_loopback_listener(sandbox: Sandbox) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    print('connected')\n"
            "except OSError as exc:\n"
            "    print('refused', exc.errno)\n"
        )
        result = sandbox.run_python(code)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
    assert result.stdout.startswith("refused")


def test_cannot_reach_a_public_address_or_resolve_names(sandbox: Sandbox) -> None:
    code = (
        "import socket\n"
        "for target in [('1.1.1.1', 53), ('8.8.8.8', 443)]:\n"
        "    try:\n"
        "        socket.create_connection(target, timeout=2)\n"
        "        print('connected')\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
        "try:\n"
        "    socket.getaddrinfo('example.com', 80)\n"
        "    print('resolved')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    result = sandbox.run_python(code)
    assert "connected" not in result.stdout
    assert "resolved" not in result.stdout
    assert len(result.stdout.splitlines()) == 3


def test_cannot_reach_a_host_abstract_unix_socket(sandbox: Sandbox) -> None:
    name = "\0" + marker()
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(name)
        listener.listen()
        code = (
            "import socket\n"
            "try:\n"
            f"    socket.socket(socket.AF_UNIX).connect({name!r})\n"
            "    print('connected')\n"
            "except OSError:\n"
            "    print('refused')\n"
        )
        result = sandbox.run_python(code)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert result.stdout == "refused\n"


# ---------------------------------------------------------------------------------------
# Hostile programs: files
# ---------------------------------------------------------------------------------------

READ_ATTEMPT = """
import os
for path in {paths!r}:
    try:
        print(path, open(path).read())
    except OSError as exc:
        print(path, type(exc).__name__)
"""


def test_files_in_the_repo_home_and_host_tmp_are_invisible(sandbox: Sandbox) -> None:
    name = f".sandbox-secret-{marker()}"
    targets = [REPO / name, Path.home() / name, Path("/tmp") / name]
    with planted(targets[0]), planted(targets[1]), planted(targets[2]):
        paths = [str(path) for path in targets]
        result = sandbox.run_python(READ_ATTEMPT.format(paths=paths))
    assert SECRET not in result.stdout
    assert result.stdout.count("FileNotFoundError") == 3


def test_the_repo_and_home_directories_are_not_mounted(sandbox: Sandbox) -> None:
    code = (
        "import os\n"
        f"print(os.path.exists({str(REPO)!r}))\n"
        "print(sorted(os.listdir('/root')))\n"
        "print(sorted(os.listdir('/')))\n"
    )
    repo_visible, root_entries, top = sandbox.run_python(code).stdout.splitlines()
    assert repo_visible == "False"
    assert root_entries in ("[]", "['.pyenv']")  # only the interpreter's prefix, if there
    assert "work" not in top
    assert "home" not in top


def test_writes_outside_the_temp_dir_fail_and_never_reach_the_host(sandbox: Sandbox) -> None:
    name = marker()
    outside = [f"/usr/{name}", f"/{name}", f"/etc/{name}", f"{REPO}/{name}", f"/root/{name}"]
    private = [f"/tmp/{name}", f"/dev/shm/{name}"]
    code = (
        "for path in " + repr(outside + private) + ":\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('failed', path)\n"
    )
    result = sandbox.run_python(code)
    for path in outside:
        assert f"failed {path}" in result.stdout
    for path in private:  # the call's own tmpfs: allowed, and private
        assert f"wrote {path}" in result.stdout
    for path in outside + private:
        assert not os.path.exists(path)


def test_subprocess_shell_runs_but_stays_contained(sandbox: Sandbox) -> None:
    name = f".sandbox-secret-{marker()}"
    with planted(REPO / name) as secret:
        script = (
            f"id -u; cat {secret} || echo no-secret; ls {REPO} || echo no-repo; "
            "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 2)\" "
            "2>/dev/null || echo no-network"
        )
        code = (
            "import importlib\n"
            "sp = importlib.import_module('sub' + 'process')\n"
            f"print(sp.run(['sh', '-c', {script!r}], capture_output=True, text=True).stdout)\n"
        )
        result = sandbox.run_python(code)
    lines = result.stdout.split()
    assert lines[0] == "1000"
    assert SECRET not in lines
    assert {"no-secret", "no-repo", "no-network"} <= set(lines)


# ---------------------------------------------------------------------------------------
# Hostile programs: processes
# ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fork_bomb_is_contained_and_leaves_no_process(sandbox: Sandbox) -> None:
    name = marker()[:15]  # the process name (comm) holds 15 characters
    code = (
        "import ctypes, os\n"
        f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError:\n"
        "        pass\n"
    )
    peak = 0
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, len(host_processes_with(name)))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    limits = SandboxLimits(max_processes=16, wall_timeout_s=2, cpu_seconds=10)
    try:
        result = check(sandbox.run_python(code, limits=limits))
    finally:
        done.set()
        watcher.join()
    assert result.exit_reason == "timeout"
    assert 0 < peak <= 16
    assert host_processes_with(name) == []


def test_detached_daemon_does_not_survive_the_call(sandbox: Sandbox) -> None:
    name = marker()
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', [{name!r}, '1000'])\n"
        "    os._exit(0)\n"
        "while True:\n"  # until the daemon shows; the sandbox's wall timeout is the hang guard
        "    time.sleep(0.02)\n"
        "    seen = [p for p in os.listdir('/proc') if p.isdigit()\n"
        f"            and {name.encode()!r} in open(f'/proc/{{p}}/cmdline', 'rb').read()]\n"
        "    if seen:\n"
        "        print('daemon running')\n"
        "        break\n"
    )
    result = sandbox.run_python(code)
    assert (result.stdout, result.exit_reason) == ("daemon running\n", "ok")  # not awaited
    assert host_processes_with(name) == []  # gone the moment the call returned


def test_background_child_holding_stdout_does_not_block_the_call(sandbox: Sandbox) -> None:
    name = marker()
    code = f"import subprocess\nsubprocess.Popen([{name!r}], executable='/bin/sleep')"
    code = code.replace(f"[{name!r}]", f"[{name!r}, '1000']")
    result = sandbox.run_python(code)
    assert result.exit_reason == "ok"  # the child's stdout was not awaited
    assert host_processes_with(name) == []


def test_killing_its_parent_does_not_break_the_sandbox(sandbox: Sandbox) -> None:
    code = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint('still here')"
    result = sandbox.run_python(code)
    assert (result.stdout, result.exit_reason) == ("still here\n", "ok")
    assert sandbox.run_python("print(2)").stdout == "2\n"


def test_killing_every_visible_process_only_reaches_the_call(sandbox: Sandbox) -> None:
    code = (
        "import os, signal, subprocess\n"
        "child = subprocess.Popen(['sleep', '1000'])\n"
        "os.kill(-1, signal.SIGKILL)\n"
        "print(child.wait())\n"
    )
    assert sandbox.run_python(code).stdout == "-9\n"
    assert sandbox.run_python("print(3)").stdout == "3\n"


def test_proc_shows_only_the_calls_own_processes(sandbox: Sandbox) -> None:
    code = "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    assert sandbox.run_python(code).stdout == "[1, 2]\n"  # the call's init and itself


def test_program_has_no_capabilities_and_no_new_privileges(sandbox: Sandbox) -> None:
    code = (
        "status = dict(line.split(':', 1) for line in open('/proc/self/status'))\n"
        "for key in ('Uid', 'CapEff', 'CapPrm', 'CapBnd', 'CapAmb', 'NoNewPrivs'):\n"
        "    print(key, status[key].split()[0])\n"
    )
    assert sandbox.run_python(code).stdout.splitlines() == [
        "Uid 1000",
        "CapEff 0000000000000000",
        "CapPrm 0000000000000000",
        "CapBnd 0000000000000000",
        "CapAmb 0000000000000000",
        "NoNewPrivs 1",
    ]


def test_killed_sandbox_process_is_replaced_on_the_next_call(own_sandbox: Sandbox) -> None:
    assert own_sandbox.run_python("print(1)").ok
    own_sandbox._runtime.zygote.proc.kill()  # e.g. the OOM killer took it
    own_sandbox._runtime.zygote.proc.wait()
    result = own_sandbox.run_python("print(2)")
    assert (result.stdout, result.exit_reason) == ("2\n", "ok")


@pytest.mark.slow
def test_call_in_flight_when_the_sandbox_dies_reports_killed(own_sandbox: Sandbox) -> None:
    name = marker()[:15]  # the process name (comm) holds 15 characters
    code = f"import ctypes, time\nctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)\n"
    code += f"time.sleep({HANG_GUARD_S})"
    limits = SandboxLimits(wall_timeout_s=HANG_GUARD_S)
    results: list[SandboxResult] = []
    thread = threading.Thread(
        target=lambda: results.append(own_sandbox.run_python(code, limits=limits))
    )
    thread.start()
    assert wait_until(lambda: host_processes_with(name))  # the call is running
    own_sandbox._runtime.zygote.proc.kill()
    thread.join(timeout=HANG_GUARD_S)
    (result,) = results
    assert (result.exit_reason, result.exit_code) == ("killed", None)
    assert "sandbox failed" in result.stderr
    assert own_sandbox.run_python("print(3)").stdout == "3\n"


def test_sandbox_made_in_a_thread_that_ended_keeps_working() -> None:
    # bwrap --die-with-parent follows the thread that started it, not the process
    made: list[Sandbox] = []
    thread = threading.Thread(target=lambda: made.append(Sandbox(pool_size=1)))
    thread.start()
    thread.join()
    time.sleep(0.2)
    with made[0] as box:
        zygote = box._runtime.zygote
        assert zygote is not None
        assert zygote.alive()  # not killed with the thread (a restart would hide that)
        assert box.run_python("print(4)").stdout == "4\n"


@pytest.mark.slow
def test_killing_the_host_process_ends_its_calls() -> None:
    name = marker()
    host = (
        "from xpgym.core.sandbox import Sandbox\n"
        "box = Sandbox(pool_size=1)\n"
        "print('ready', flush=True)\n"
        f"box.run_python(\"import os; os.execv('/bin/sleep', [{name!r}, '1000'])\")\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", host], stdout=subprocess.PIPE, cwd=REPO)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        assert wait_until(lambda: host_processes_with(name))  # the call is running
    finally:
        proc.kill()
        proc.wait()
    assert wait_until(lambda: host_processes_with(name) == [])


# ---------------------------------------------------------------------------------------
# Isolation between calls
# ---------------------------------------------------------------------------------------


def test_files_do_not_persist_between_calls(sandbox: Sandbox) -> None:
    first = (
        "import os\n"
        "for path in ('left.txt', '/tmp/left2.txt', '/dev/shm/left3'):\n"
        "    open(path, 'w').write('x')\n"
        "print(os.getcwd())\n"
    )
    assert sandbox.run_python(first).stdout == "/tmp\n"
    second = "import os\nprint(os.listdir('.'), os.listdir('/tmp'), os.listdir('/dev/shm'))"
    assert sandbox.run_python(second).stdout == "[] [] []\n"


def test_globals_and_modules_do_not_persist_between_calls(sandbox: Sandbox) -> None:
    first = (
        "import builtins, json, sys, random\n"
        "builtins.LEAK = json.LEAK = 1\n"
        "sys.modules['leak'] = sys\n"
        "sys.path.append('/leak')\n"
    )
    sandbox.run_python(first)
    second = (
        "import builtins, json, sys\n"
        "print(hasattr(builtins, 'LEAK'), hasattr(json, 'LEAK'), 'leak' in sys.modules,\n"
        "      '/leak' in sys.path)\n"
    )
    assert sandbox.run_python(second).stdout == "False False False False\n"


def test_random_numbers_differ_between_calls(sandbox: Sandbox) -> None:
    code = "import random; print(random.random())"
    outputs = {sandbox.run_python(code).stdout for _ in range(3)}
    assert len(outputs) == 3


def test_processes_do_not_persist_between_calls(sandbox: Sandbox) -> None:
    name = marker()
    sandbox.run_python(
        f"import subprocess\nsubprocess.Popen([{name!r}, '1000'], executable='sleep')"
    )
    code = (
        "import os\n"
        "print([p for p in os.listdir('/proc') if p.isdigit() and "
        f"{name.encode()!r} in open(f'/proc/{{p}}/cmdline', 'rb').read()])"
    )
    assert sandbox.run_python(code).stdout == "[]\n"


def test_concurrent_calls_cannot_see_each_other(sandbox: Sandbox) -> None:
    name = marker()
    holder = (
        "import ctypes, os, socket, time\n"
        f"open('/dev/shm/{name}', 'w').write('x')\n"
        f"open('/tmp/{name}', 'w').write('x')\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"s.bind('\\0{name}')\n"
        "s.listen()\n"
        "print('ready', flush=True)\n"
        f"ctypes.CDLL(None).prctl(15, {name.encode()!r}, 0, 0, 0)  # set up: show it\n"
        f"time.sleep({HANG_GUARD_S})\n"
    )
    limits = SandboxLimits(wall_timeout_s=HANG_GUARD_S)
    results: list[SandboxResult] = []
    thread = threading.Thread(
        target=lambda: results.append(sandbox.run_python(holder, limits=limits))
    )
    thread.start()
    assert wait_until(lambda: host_processes_with(name))  # the holder is set up and waiting
    probe = (
        "import os, socket\n"
        "try:\n"
        f"    socket.socket(socket.AF_UNIX).connect('\\0{name}')\n"
        "    print('connected')\n"
        "except OSError:\n"
        "    print('refused')\n"
        "print(os.listdir('/dev/shm'), os.listdir('/tmp'))\n"
        "print(len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    )
    seen = sandbox.run_python(probe).stdout
    holders = host_processes_with(name)
    assert holders  # still waiting: the probe ran while it held its resources
    for pid in holders:
        os.kill(pid, signal.SIGKILL)
    thread.join()
    assert results[0].stdout == "ready\n"
    assert seen == "refused\n[] []\n2\n"


# ---------------------------------------------------------------------------------------
# Packages
# ---------------------------------------------------------------------------------------


def test_third_party_packages_are_hidden_by_default(sandbox: Sandbox) -> None:
    assert "No module named 'numpy'" in sandbox.run_python("import numpy").stderr
    assert "No module named 'numpy'" in sandbox.run(["python3", "-c", "import numpy"]).stderr


def test_site_packages_makes_the_venvs_packages_importable() -> None:
    with Sandbox(site_packages=True, pool_size=1) as box:
        result = box.run_python("import numpy; print(int(numpy.arange(4).sum()))")
    assert (result.stdout, result.exit_reason) == ("6\n", "ok")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A temp dir every user may read (the sandbox runs as 'nobody' when the host is root)."""
    path = Path(tempfile.mkdtemp(prefix="xpgym-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_extra_paths_are_importable_read_only(shared_dir: Path) -> None:
    module = shared_dir / "helper_mod.py"
    module.write_text("VALUE = 7\n")
    module.chmod(0o666)  # writable by anyone: only the read-only mount may stop the write
    code = "import helper_mod\nprint(helper_mod.VALUE)\nopen(helper_mod.__file__, 'a').write('x')\n"
    with Sandbox(extra_paths=[shared_dir], pool_size=1) as box:
        result = box.run_python(code)
    assert result.stdout == "7\n"
    assert "Read-only file system" in result.stderr
    assert module.read_text() == "VALUE = 7\n"


def test_preloaded_module_that_starts_a_thread_is_refused(shared_dir: Path) -> None:
    (shared_dir / "starts_thread.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    with pytest.raises(SandboxUnavailableError, match="started 1 thread"):
        Sandbox(extra_paths=[shared_dir], preload=["starts_thread"])


# ---------------------------------------------------------------------------------------
# Backends and errors
# ---------------------------------------------------------------------------------------


def test_missing_bubblewrap_raises_unavailable_with_install_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sandbox_host.shutil, "which", lambda name: None)
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        Sandbox()


def test_sandbox_that_cannot_start_says_how_to_enable_namespaces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sandbox_host.shutil, "which", lambda name: "/bin/false")
    with pytest.raises(SandboxUnavailableError, match="unprivileged_userns_clone"):
        Sandbox()


def test_unsafe_backend_warns_every_time_it_is_constructed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="xpgym.core.sandbox"):
        Sandbox(backend=UNSAFE_NO_SANDBOX)
        Sandbox(backend=UNSAFE_NO_SANDBOX)
    assert sum("WITHOUT any isolation" in r.getMessage() for r in caplog.records) == 2


def test_unsafe_backend_runs_code_with_limits() -> None:
    unsafe = Sandbox(backend=UNSAFE_NO_SANDBOX, limits=SandboxLimits(wall_timeout_s=1))
    result = unsafe.run_python(
        "import os; print(open('f').read(), os.getcwd() != '/')", files={"f": "x"}
    )
    assert (result.stdout, result.exit_reason) == ("x True\n", "ok")
    assert unsafe.run_python("import time; time.sleep(30)").exit_reason == "timeout"
    assert unsafe.run_python("bytearray(8 << 30)").exit_reason == "memory"


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(ValueError, match="backend must be"):
        Sandbox(backend="docker")


def test_closed_sandbox_refuses_calls() -> None:
    box = Sandbox(pool_size=1)
    box.close()
    box.close()
    with pytest.raises(sandbox_module.SandboxError, match="closed"):
        box.run_python("print(1)")


def test_default_sandbox_is_shared() -> None:
    assert sandbox_module.default_sandbox() is sandbox_module.default_sandbox()


def test_forked_host_process_gets_its_own_sandbox(sandbox: Sandbox) -> None:
    assert sandbox.run_python("print(1)").ok
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        ok = sandbox.run_python("print(5)").stdout == "5\n"
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert sandbox.run_python("print(6)").stdout == "6\n"
