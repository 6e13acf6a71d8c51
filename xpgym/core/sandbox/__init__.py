"""Run untrusted programs in a real sandbox: bubblewrap namespaces, rlimits, a fresh tmpfs.

`Sandbox.run_python` runs a Python source string, `Sandbox.run` runs a program (argv) after
writing `files` into its working directory. Both return a `SandboxResult`; neither raises for
anything the program does (crash, timeout, memory, output flood, fork bomb). The process-wide
`default_sandbox()` is shared by every tool that is not given its own.

What a program gets (threat model: hostile code written by a model)
------------------------------------------------------------------

* Its own user, mount, pid, IPC and network namespaces: no network at all (not even a
  loopback shared with other calls), no view of host processes or of other calls.
* Read-only system directories: ``/usr``, ``/bin``, ``/lib*`` (bound or symlinked as on the
  host), ``/etc/ld.so.cache`` and ``/etc/alternatives``, and the interpreter's prefix
  (`sys.base_prefix`) with its own site-packages hidden (an empty read-only tmpfs): only the
  standard library imports. Third-party packages only when asked (``site_packages=True``
  binds the running venv's site-packages, `extra_paths` any directory) under
  ``/opt/xpgym/path<i>``. Nothing else of the host: not the repository, not ``$HOME``, not
  ``/root`` (only the prefix below it), not the host ``/tmp``.
* A fresh, private tmpfs at ``/tmp`` (the working directory and ``$HOME``) and another at
  ``/dev/shm``, each at most `SandboxLimits.tmp_size_bytes`; they live in the call's mount
  namespace and vanish with it. A fresh ``/proc`` showing only the call's own processes.
* rlimits: CPU seconds, address space, file size, processes, open files (core dumps off),
  set in the program's own process before its code runs, plus a wall-clock timeout and a cap
  on captured output (read incrementally; the program is killed when it goes over).
* The program runs as uid 1000 of its own user namespace, with no capabilities, an empty
  bounding set and ``no_new_privs``. When the host process is root, the whole sandbox runs as
  the host's ``nobody`` (uid 65534), because the kernel never applies ``RLIMIT_NPROC`` to
  uid 0: without that a fork bomb could exhaust the host's pids.
* When the call returns, every process it started is gone, double-forked daemons and
  ``setsid`` children included: the call's init, pid 1 of the call's pid namespace, kills
  and reaps them all before it reports (and should the init die, the kernel kills the whole
  namespace).


Each call is a fresh fork of an untouched zygote (a warm interpreter, see
`xpgym.core.sandbox.host`) and is used once, so no state leaks from one call to the next: not
files (private tmpfs), not globals (fresh fork), not processes (pid namespace), not SysV/POSIX
IPC (IPC namespace and private ``/dev/shm``), not sockets (network namespace).

Differences from ``python -c`` worth knowing: modules the zygote preloaded (`DEFAULT_PRELOAD`)
are already in ``sys.modules``; ``random`` is reseeded in each call (``os.fork`` hook), but
the string hash seed is the zygote's, so ``set`` iteration order is the same in every call;
stdout is line-buffered, so output printed before a timeout is not lost.

Lifecycle and threads: a `Sandbox` is thread-safe; calls from many threads run concurrently.
The zygote is started by the constructor (so a missing bubblewrap is reported at once, as
`SandboxUnavailableError`). If the zygote dies, calls in flight return
``exit_reason="killed"`` with a note on stderr, and the next call starts a new one (a call
that had not started yet is retried once). A zygote that stops answering is treated as dead
once a call has waited its ``wall_timeout_s`` plus 2 s for the zygote to build it. After
``os.fork`` of the host, the child starts its own zygote on first use.

Requirements: Linux >= 5.3 with unprivileged user namespaces (nested ones too), on x86_64,
aarch64, riscv64 or ppc64 (the raw ``clone``), bubblewrap >= 0.5, Python >= 3.10. Modules
preloaded into the zygote must not start threads (checked: a copy of a process with other
threads can deadlock).
``Sandbox(backend="UNSAFE_NO_SANDBOX")`` runs programs as plain subprocesses (rlimits, a temp
dir, a process group and nothing else) and logs a warning each time one is constructed; it
is never chosen automatically.

Limits of the design, stated plainly: memory is capped per process (``RLIMIT_AS``), so a
program may hold up to ``max_processes * memory_bytes`` in total (plus its tmpfs); there is no
cgroup. There is no seccomp filter, so the kernel's full syscall surface (user namespaces
included) is reachable from inside. On kernels before 5.14, ``RLIMIT_NPROC`` counts every
process of the sandbox's host uid, not only the call's.

Modules, split at the sandbox wall
----------------------------------

* `base`: `SandboxLimits`, `SandboxResult`, the errors and constants (what a call takes
  and gives).
* `executor`: `Sandbox` and `default_sandbox` (the public API; checks arguments, builds the
  request, owns the lifecycle).
* `host`: the host side: the bubblewrap command line, starting and replacing the zygote,
  dispatching calls, collecting output and classifying the result, the unsafe backend.
* `inside`: what runs inside bubblewrap (the zygote, each call's init and program). It is
  shipped as source text, so it imports the standard library only.

Import the public names from this package.
"""

from xpgym.core.sandbox.base import (
    DEFAULT_PRELOAD,
    EXIT_REASONS,
    UNSAFE_NO_SANDBOX,
    SandboxError,
    SandboxLimits,
    SandboxResult,
    SandboxUnavailableError,
)
from xpgym.core.sandbox.executor import Sandbox, default_sandbox

__all__ = [
    "DEFAULT_PRELOAD",
    "EXIT_REASONS",
    "UNSAFE_NO_SANDBOX",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "default_sandbox",
]
