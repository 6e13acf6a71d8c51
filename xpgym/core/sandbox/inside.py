"""The inside of the sandbox: the zygote, each call's init, and the program process.

Nothing here runs in the host process. The host (`xpgym.core.sandbox.host`) reads this
file's source and starts it in bubblewrap as ``python -I -B -c <source> --xpgym-zygote
CONFIG`` (the zygote), or, for the `UNSAFE_NO_SANDBOX` backend, as a plain subprocess
``python -I -B -c <source> --xpgym-unsafe REQUEST_FD``. Shipping the source text means the
sandbox never sees this file, the repository or xpgym: so this module imports the standard
library only (``tests/core/test_sandbox_inside.py`` checks it, and runs it with ``python -I -S``),
and it does not log (the host logs what the zygote writes to stderr).

The host imports this module only for the protocol facts both sides share: `SANDBOX_UID`,
the entry flags, the status events and `write_all`.

Processes and what each does
----------------------------

* The *zygote* (`_zygote_main`) sets up once: drops host root if asked, preloads modules,
  checks that it has a single thread, probes that a call's namespaces can be made, freezes
  its heap (``gc.freeze``). Then it only builds *calls*: ``pool_size`` ahead of time, one more
  each time the host takes one. It never runs user code.
* A call's *init* ``G`` (`_call_init`) is cloned from the zygote into new user, mount, pid,
  IPC and network namespaces (`_clone_into_namespaces`), mounts a fresh ``/proc``, forks the
  program ``H`` and then reaps every process of the call. When the program exits, the wall
  clock runs out or the host closes the cancel pipe, it kills whatever is left (``kill(-1)``
  from pid 1), reports on the status pipe and exits, which ends the namespaces.
* The *program* ``H`` (`_run_call`) waits for the host's pipes (``SCM_RIGHTS``), hands the
  status and cancel pipes to its init, mounts its tmpfs, writes the files, applies the
  rlimits, drops every capability, closes every other fd and runs the code in a fresh
  ``__main__`` (or ``execve``'s the argv).

Status events, one JSON line each on the status pipe: ``started`` (the program is about to
run), then one of `FINAL_EVENTS`: ``exit`` (wait status, CPU seconds, max RSS) or
``stopped`` (the init stopped the call: ``timeout`` or ``cancelled``); ``error`` when the
call's setup failed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, Final

SANDBOX_UID: Final = 1000
"""The uid (and gid) a program has in its call's user namespace."""

ZYGOTE_FLAG: Final = "--xpgym-zygote"
"""``python -c <source> --xpgym-zygote CONFIG``: run the zygote (CONFIG is JSON)."""

UNSAFE_FLAG: Final = "--xpgym-unsafe"
"""``python -c <source> --xpgym-unsafe REQUEST_FD``: run one program without a sandbox."""

FINAL_EVENTS: Final = frozenset({"exit", "stopped"})
"""Status events that end a call's report."""

_CLONE_NEWNS = 0x00020000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_CALL_NAMESPACES = _CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | _CLONE_NEWNET
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MNT_DETACH = 2
_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _clone_syscall_number() -> int:
    """``clone``'s syscall number; every listed ABI takes the flags first."""
    machine = os.uname().machine
    numbers = {"x86_64": 56, "aarch64": 220, "riscv64": 220, "ppc64le": 120, "ppc64": 120}
    if machine not in numbers:
        raise OSError(f"the sandbox does not support the {machine!r} architecture yet")
    return numbers[machine]


class _Libc:
    """The few libc calls Python 3.10 lacks (``unshare``, ``mount``, ``prctl``, ``capset``)."""

    def __init__(self) -> None:
        import ctypes

        class CapHeader(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class CapData(ctypes.Structure):
            _fields_ = [
                ("effective", ctypes.c_uint32),
                ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32),
            ]

        self._ctypes = ctypes
        self._lib = ctypes.CDLL(None, use_errno=True)
        self._cap_header = CapHeader()
        self._cap_data = (CapData * 2)()  # all zero: no capabilities

    def _check(self, result: int, what: str) -> None:
        if result != 0:
            errno = self._ctypes.get_errno()
            raise OSError(errno, f"{what}: {os.strerror(errno)}")

    def clone(self, flags: int) -> int:
        """The raw ``clone`` syscall with a null stack (i.e. ``fork`` with `flags`)."""
        c_ulong = self._ctypes.c_ulong
        pid = self._lib.syscall(_clone_syscall_number(), c_ulong(flags), c_ulong(0), 0, 0, 0)
        if pid < 0:
            errno = self._ctypes.get_errno()
            raise OSError(errno, f"clone: {os.strerror(errno)}")
        return pid

    def mount(self, source: str, target: str, fstype: str, flags: int, data: str = "") -> None:
        self._check(
            self._lib.mount(
                source.encode(),
                target.encode(),
                fstype.encode(),
                self._ctypes.c_ulong(flags),
                data.encode() or None,
            ),
            f"mount {fstype} on {target}",
        )

    def umount(self, target: str) -> None:
        self._check(self._lib.umount2(target.encode(), _MNT_DETACH), f"umount {target}")

    def prctl(self, option: int, arg: int, arg3: int = 0) -> int:
        c_ulong = self._ctypes.c_ulong
        return self._lib.prctl(option, c_ulong(arg), c_ulong(arg3), c_ulong(0), c_ulong(0))

    def drop_capabilities(self) -> None:
        """Empty the bounding and ambient sets, then every capability set; no_new_privs."""
        cap = 0
        while self.prctl(_PR_CAPBSET_DROP, cap) == 0:
            cap += 1
        self.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)
        header, data = self._cap_header, self._cap_data
        header.version, header.pid = _LINUX_CAPABILITY_VERSION_3, 0
        self._check(self._lib.capset(self._ctypes.byref(header), data), "capset")
        self._check(self.prctl(_PR_SET_NO_NEW_PRIVS, 1), "no_new_privs")


def main(argv: list[str]) -> None:
    """``--xpgym-zygote CONFIG`` or ``--xpgym-unsafe REQUEST_FD`` (see the module docstring)."""
    if argv[0] == ZYGOTE_FLAG:
        _zygote_main(json.loads(argv[1]))
    elif argv[0] == UNSAFE_FLAG:
        request = marshal.loads(_read_all(int(argv[1])))
        _unsafe_main(request)
    else:
        raise SystemExit(f"unknown sandbox entry {argv[0]!r}")


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to the blocking file descriptor `fd`."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _zygote_main(config: dict[str, Any]) -> None:
    """Set up once, then build calls for the host; never returns.

    Sends ``pool_size`` pre-built calls' dispatch sockets to the host at once, and one more
    each time the host says it took one: the socket's receive queue is the pool.
    """
    sock = socket.socket(fileno=config["fd"])
    libc = _Libc()
    info: dict[str, Any] = {"ok": True, "warnings": []}
    try:
        _cover_free_proc(libc, required=config["drop_root"])
        if config["drop_root"]:
            os.setgroups([])
            os.setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
            os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)
            libc.drop_capabilities()
        # dumpable: the id maps of a new call (/proc/<pid>/uid_map) must be ours to write
        libc.prctl(_PR_SET_DUMPABLE, 1)
        sys.path.extend(config["sys_path"])
        for name in config["preload"]:
            try:
                __import__(name)
            except Exception as exc:  # a broken preload must not break the sandbox
                info["warnings"].append(f"preloading {name!r} failed: {exc!r}")
        threads = len(os.listdir("/proc/self/task"))
        if threads != 1:  # forking a process with other threads can deadlock its copies
            raise RuntimeError(f"the preloaded modules started {threads - 1} thread(s)")
        info["fresh_proc"] = _probe_call_namespaces(libc)
        for name in ("atexit", "io", "resource", "types"):  # what every call uses
            __import__(name)
        # Objects alive now are never collected: a collection in a call would write to
        # every one of them and copy all the zygote's pages (copy-on-write).
        gc.collect()
        gc.freeze()
    except Exception as exc:
        info = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    sock.send(json.dumps(info).encode())
    if not info["ok"]:
        os._exit(1)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # calls' inits are reaped by the kernel
    try:
        for _ in range(config["pool_size"]):
            _send_call(libc, sock)
        while sock.recv(16):
            _send_call(libc, sock)  # the host took a call: build its replacement
    except OSError:
        pass
    os._exit(0)  # the host closed its end: the sandbox is no longer wanted


def _send_call(libc: _Libc, sock: socket.socket) -> None:
    """Build a call and hand its dispatch socket to the host (or the error, if none)."""
    try:
        dispatch = _build_call(libc, keep=[sock.fileno()])
    except OSError as exc:
        sock.send(json.dumps({"error": f"cannot build a call: {exc}"}).encode())
        return
    socket.send_fds(sock, [b"{}"], [dispatch.fileno()])
    dispatch.close()


def _cover_free_proc(libc: _Libc, *, required: bool) -> None:
    """Unmount what bubblewrap mounted over parts of ``/proc`` (only when it could).

    The kernel lets an unprivileged namespace mount a new procfs only if an existing one is
    fully visible; bubblewrap covers ``/proc/sys`` and friends when it runs as (mapped) root.
    """
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split()[4] for line in f]
    for mountpoint in reversed(mounts):
        if mountpoint.startswith("/proc/"):
            try:
                libc.umount(mountpoint)
            except OSError:
                if required:
                    raise


def _clone_into_namespaces(libc: _Libc) -> int:
    """Fork into new user/mount/pid/IPC/net namespaces, as ``fork`` returns.

    The child is pid 1 of its pid namespace and uid 1000 of its user namespace (mapped to
    our uid), with every capability there; it returns only once the parent wrote its id
    maps. A raw ``clone`` skips Python's after-fork hooks in the child: fine here, the
    zygote has a single thread and the child forks the program with ``os.fork``.
    """
    go_r, go_w = os.pipe()
    pid = libc.clone(_CALL_NAMESPACES | signal.SIGCHLD)
    if pid == 0:
        os.close(go_w)
        if os.read(go_r, 1) != b"1":
            os._exit(1)
        os.close(go_r)
        return 0
    os.close(go_r)
    try:
        uid, gid = os.getuid(), os.getgid()
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{SANDBOX_UID} {uid} 1"),
            ("gid_map", f"{SANDBOX_UID} {gid} 1"),
        ):
            with open(f"/proc/{pid}/{name}", "w") as f:
                f.write(text)
        os.write(go_w, b"1")
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        raise
    finally:
        os.close(go_w)
    return pid


def _probe_call_namespaces(libc: _Libc) -> bool:
    """Check, once, that a call's namespaces can be made; return whether /proc is fresh."""
    read_fd, write_fd = os.pipe()
    pid = _clone_into_namespaces(libc)
    if pid == 0:
        try:
            os.close(read_fd)
            fresh = _mount_proc(libc)
            _mount_tmp(libc, 1 << 20)
            os.write(write_fd, b"1" if fresh else b"0")
        except BaseException as exc:
            os.write(write_fd, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    answer = _read_all(read_fd)
    os.waitpid(pid, 0)
    if answer not in (b"0", b"1"):
        raise OSError(f"cannot create a call's namespaces inside bubblewrap ({answer.decode()})")
    return answer == b"1"


def _mount_proc(libc: _Libc) -> bool:
    """A fresh /proc of the call's pid namespace; returns `False` if the kernel refused it.

    Then an empty read-only tmpfs covers /proc instead, so no call sees another.
    """
    try:
        libc.mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        return True
    except OSError:
        libc.mount("tmpfs", "/proc", "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "size=4k")
        return False


def _mount_tmp(libc: _Libc, size: int) -> None:
    """The call's private, writable tmpfs on /tmp and /dev/shm, `size` bytes each."""
    options = f"size={size},nr_inodes=16384,uid={SANDBOX_UID},gid={SANDBOX_UID}"
    libc.mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, options + ",mode=0700")
    libc.mount("tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, options + ",mode=1777")


def _status(fd: int, event: str, **fields: Any) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, json.dumps({"event": event, **fields}).encode() + b"\n")


def _build_call(libc: _Libc, keep: Sequence[int]) -> socket.socket:
    """Build one call ahead of time; return its dispatch socket.

    The init ``G`` is cloned into the call's namespaces and mounts /proc; it forks the
    program process ``H``, which waits on the dispatch socket for the call's pipes. `keep`
    lists the zygote's fds, which the new call closes at once.
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        pid = _clone_into_namespaces(libc)
    except BaseException:
        ours.close()
        theirs.close()
        raise
    if pid == 0:
        try:
            ours.close()
            for fd in keep:
                os.close(fd)
            _call_init(libc, theirs)
        finally:
            os._exit(70)
    theirs.close()
    return ours


def _call_init(libc: _Libc, dispatch: socket.socket) -> None:
    """The call's init ``G``, pid 1 of its namespaces; never returns.

    Mounts /proc, forks the program ``H`` and waits for it to take a call. Then reaps every
    process until the program exits, the wall clock runs out or the host closes the cancel
    pipe; it then kills and reaps whatever is left in the namespace, reports, and exits (the
    namespaces go with it). Signals from inside the namespace cannot kill it (the kernel
    drops them for an init without handlers), and it is not dumpable, so the program
    cannot ptrace it.
    """
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; programs must not
    _mount_proc(libc)
    os.setsid()
    to_init, to_program = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    program = os.fork()
    if program == 0:
        try:
            to_init.close()
            _run_call(libc, dispatch, to_program)
        finally:
            os._exit(71)
    dispatch.close()
    to_program.close()
    libc.prctl(_PR_SET_DUMPABLE, 0)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    message, fds, _, _ = socket.recv_fds(to_init, 4096, 2)
    if not message or len(fds) != 2:  # the program died before it got a call
        os._exit(0)
    st_fd, cancel_fd = fds
    deadline = time.monotonic() + json.loads(message)["wall_timeout_s"]
    poller = select.poll()
    poller.register(wake_r, select.POLLIN)
    poller.register(cancel_fd, select.POLLIN)
    while True:
        while True:  # reap everything that exited: orphans count against RLIMIT_NPROC
            try:
                pid, wait_status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            if pid == program:
                cpu = usage.ru_utime + usage.ru_stime
                _end_call(st_fd, "exit", status=wait_status, cpu=cpu, maxrss_kb=usage.ru_maxrss)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _end_call(st_fd, "stopped", reason="timeout")
        ready = [fd for fd, _ in poller.poll(remaining * 1000 + 1)]
        if cancel_fd in ready:
            _end_call(st_fd, "stopped", reason="cancelled")
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)


def _end_call(st_fd: int, event: str, **fields: Any) -> None:
    """In the init: kill and reap every other process of the call, report, exit.

    Every process of the namespace whose parent died is the init's child, so an init
    without children is alone in its namespace (the common case: no ``kill(-1)`` needed).
    """
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        pass
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # from pid 1: every process of this pid namespace
        with contextlib.suppress(ChildProcessError):
            while True:
                os.wait()
    _status(st_fd, event, **fields)
    os._exit(0)


def _run_call(libc: _Libc, dispatch: socket.socket, to_init: socket.socket) -> None:
    """The program process ``H``: wait for a call, set it up, run it; never returns.

    Hands the status and cancel pipes to the init first, so that the wall clock runs and
    a failure below is reported; then writes the files, applies the rlimits, drops every
    capability and runs the code.
    """
    message, fds, _, _ = socket.recv_fds(dispatch, 16, 5)
    if not message or len(fds) != 5:  # the zygote is gone
        os._exit(0)
    req_fd, out_fd, err_fd, st_fd, cancel_fd = fds
    try:
        request = marshal.loads(_read_all(req_fd))
        limits = request["limits"]
        wall = json.dumps({"wall_timeout_s": limits["wall_timeout_s"]}).encode()
        socket.send_fds(to_init, [wall], [st_fd, cancel_fd])
        _mount_tmp(libc, limits["tmp_size_bytes"])
        os.chdir("/tmp")
        _write_files(request["files"])
        stdin_fd = _stdin_fd(request["stdin"])
        os.dup2(stdin_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        _apply_limits(limits)
        libc.drop_capabilities()
    except BaseException as exc:
        _status(st_fd, "error", message=f"call setup: {type(exc).__name__}: {exc}")
        os._exit(71)
    _status(st_fd, "started")
    os.closerange(3, 1 << 16)  # from here on, nothing of ours is reachable
    try:
        _run_program(request)
    finally:
        os._exit(71)


def _write_files(files: dict[str, bytes]) -> None:
    for name, content in files.items():
        directory = os.path.dirname(name)
        if directory:
            os.makedirs(directory, exist_ok=True)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o755)
        try:
            write_all(fd, content)
        finally:
            os.close(fd)


def _stdin_fd(data: bytes | None) -> int:
    if data is None:
        return os.open("/dev/null", os.O_RDONLY)
    fd = os.memfd_create("stdin")
    write_all(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _apply_limits(limits: dict[str, Any]) -> None:
    import resource

    cpu = max(1, int(limits["cpu_seconds"] + 0.999))
    nproc = int(limits["max_processes"]) + 1  # + 1: the call's init is counted too
    for name, soft, hard in (
        ("RLIMIT_CPU", cpu, cpu + 1),
        ("RLIMIT_AS", int(limits["memory_bytes"]), int(limits["memory_bytes"])),
        ("RLIMIT_FSIZE", int(limits["file_size_bytes"]), int(limits["file_size_bytes"])),
        ("RLIMIT_NPROC", nproc, nproc),
        ("RLIMIT_NOFILE", int(limits["max_open_files"]), int(limits["max_open_files"])),
        ("RLIMIT_CORE", 0, 0),
    ):
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _run_program(request: dict[str, Any]) -> None:
    """The program ``H``: exec the argv, or run the code in a fresh ``__main__``; exits."""
    env = request["env"]
    if request["mode"] == "argv":
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        argv = request["argv"]
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(2, f"cannot execute {argv[0]!r}: {exc.strerror}\n".encode())
            os._exit(127)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["-c"]
    sys.path.insert(0, "")
    sys.path.extend(path for path in request["sys_path"] if path not in sys.path)
    _fresh_std_streams()
    os._exit(_exec_main(request["code"]))


def _fresh_std_streams() -> None:
    import io

    def stream(fd: int, mode: str, **kwargs: Any) -> io.TextIOWrapper:
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        return io.TextIOWrapper(buffered, encoding="utf-8", **kwargs)

    sys.stdin = stream(0, "r", errors="strict")
    sys.stdout = stream(1, "w", errors="strict", line_buffering=True)
    sys.stderr = stream(2, "w", errors="backslashreplace", line_buffering=True)
    # typeshed declares sys.__std*__ Final; this child is a fresh interpreter, so they are these.
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr  # type: ignore[misc]


def _exec_main(code: str) -> int:
    """Run `code` as ``__main__`` like ``python -c``; return the process exit status."""
    import builtins
    import types

    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    status = 0
    try:
        exec(compile(code, "<string>", "exec"), main.__dict__)
    except SystemExit as exc:
        status = _system_exit_status(exc)
    except BaseException as exc:
        traceback = exc.__traceback__.tb_next if exc.__traceback__ else None
        sys.excepthook(type(exc), exc, exc.with_traceback(traceback).__traceback__)
        status = 1
    return _finalize(status)


def _system_exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(Exception):
        sys.stderr.write(f"{exc.code}\n")
    return 1


def _finalize(status: int) -> int:
    """What the interpreter does at exit: join threads, run atexit, flush the streams."""
    import atexit

    try:
        threading._shutdown()  # type: ignore[attr-defined]  # private, as the interpreter calls it
    except SystemExit as exc:
        status = _system_exit_status(exc)
    except BaseException:
        pass
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = status or 120
    return status


def _unsafe_main(request: dict[str, Any]) -> None:
    """The `UNSAFE_NO_SANDBOX` launcher: files, stdin, rlimits, then the program."""
    _write_files(request["files"])
    stdin_fd = _stdin_fd(request["stdin"])
    os.dup2(stdin_fd, 0)
    os.closerange(3, 1 << 16)  # also closes the status pipe: EOF for the host
    _apply_limits(request["limits"])
    _run_program(request)


if __name__ == "__main__" and sys.argv[1:2] in ([ZYGOTE_FLAG], [UNSAFE_FLAG]):
    main(sys.argv[1:])
