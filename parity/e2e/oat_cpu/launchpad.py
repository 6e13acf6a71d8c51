"""Test harness (not a way to train): launchpad's program, run in one process, and Plasma's
object store, in that process's memory. Stand-ins for ``dm-launchpad`` (Python <= 3.10 only)
and ``pyarrow.plasma`` (pyarrow < 12 only), the parts Oat 0.2.4 uses.

**launchpad** (``oat/interface.py``, ``oat/experiment/main.py``, ``oat/learners/base.py``,
``oat/utils/ipc.py``): `Program` with ``add_node``; `CourierNode` and `PyClassNode` (a class
and its constructor arguments); `launch`; `stop`; ``launchpad.nodes.python.
local_multi_processing.PythonProcess`` (a node's environment, accepted and unused: there is one
process and no GPU to pin). The node semantics kept:

- a node's object is built by `launch`, not where the node is declared, courier nodes first
  (in the order they were added), then the Python nodes;
- a `Handle` (what ``add_node`` returns for a courier node) passed to a constructor becomes a
  client of that node's object (`Client`): ``client.method(*args)`` is a blocking call,
  ``client.futures.method(*args)`` returns a ``concurrent.futures.Future``; every call runs on
  the node's own thread pool (courier serves each call on a thread of its server), and its
  arguments and result are deep copies (courier pickles them across processes);
- every other constructor argument is a deep copy too (each node unpickles its own: Oat's
  learner and actor each hold their own ``args``);
- a courier node whose object has ``run`` runs it on a thread of its own; a Python node's
  ``run`` runs on a thread of its own; `launch` returns when `stop` is called, or raises
  when a node's ``run`` raised (launchpad would print it and leave the program hanging).

Not kept: processes (everything shares one interpreter; vLLM's engine still runs in its own
processes, as it does under launchpad), courier's network transport, ``launch_type`` and
``terminal`` (accepted, unused).

**Plasma** (``oat/utils/ipc.py:25``, ``from pyarrow import plasma``): `start_plasma_store`,
`connect`, `ObjectID` over one in-memory store per path (`PlasmaStore`: ``put`` of bytes up to
the store's size, ``get``, ``delete``), which is what Oat's ``PlasmaShmServer`` and
``PlasmaShmClient`` call; their own code runs unchanged.

`install` puts both into ``sys.modules`` (`stand_in_modules`); call it before Oat is
imported.
"""

from __future__ import annotations

import copy
import logging
import sys
import threading
import types
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Client",
    "CourierNode",
    "Handle",
    "ObjectID",
    "PlasmaStore",
    "Program",
    "PyClassNode",
    "PythonProcess",
    "connect",
    "install",
    "launch",
    "stand_in_modules",
    "start_plasma_store",
    "stop",
]

logger = logging.getLogger(__name__)

CALL_THREADS = 8
"""Threads serving one courier node's calls (courier's server is a thread pool)."""


# --------------------------------------------------------------------------------------
# launchpad
# --------------------------------------------------------------------------------------


@dataclass
class PythonProcess:
    """``local_multi_processing.PythonProcess``: a node's process settings (unused here)."""

    env: dict[str, str] = field(default_factory=dict)


class _Node:
    """A class and the arguments its object is built with when the program launches."""

    def __init__(self, constructor: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        self.constructor = constructor
        self.args = args
        self.kwargs = kwargs
        self.instance: Any = None


class CourierNode(_Node):
    """A node whose object serves calls (`Client`) and runs its ``run``, if any."""


class PyClassNode(_Node):
    """A node whose object runs its ``run``."""


class Handle:
    """What ``Program.add_node`` returns for a courier node: stands for the node's object in
    other nodes' constructor arguments, and becomes a `Client` when the program launches."""

    def __init__(self, node: CourierNode, label: str) -> None:
        self.node = node
        self.label = label

    def __repr__(self) -> str:
        return f"Handle({self.label})"


class Program:
    """``lp.Program``: the nodes, in the order they were added."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[tuple[str, _Node]] = []

    def add_node(self, node: _Node, label: str | None = None) -> Handle | None:
        """Add `node`; a courier node's `Handle` (None for a Python node, whose object no
        other node calls)."""
        label = label or f"node_{len(self.nodes)}"
        self.nodes.append((label, node))
        return Handle(node, label) if isinstance(node, CourierNode) else None


class _Futures:
    def __init__(self, client: Client) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., Future[Any]]:
        return lambda *args, **kwargs: self._client._submit(name, args, kwargs)


class Client:
    """A courier client of one node's object: ``client.name(*args, **kwargs)`` blocks until
    the call returns; ``client.futures.name(...)`` returns its future. Calls run on the
    node's thread pool, on deep copies of the arguments, and return a deep copy."""

    def __init__(self, label: str, instance: Any, pool: ThreadPoolExecutor) -> None:
        self._label = label
        self._instance = instance
        self._pool = pool
        self.futures = _Futures(self)

    def _submit(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future[Any]:
        method = getattr(self._instance, name)
        args, kwargs = copy.deepcopy((args, kwargs))
        return self._pool.submit(lambda: copy.deepcopy(method(*args, **kwargs)))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self._submit(name, args, kwargs).result()

    def __deepcopy__(self, memo: dict[int, Any]) -> Client:
        return self  # a courier client unpickles as a client of the same node

    def __repr__(self) -> str:
        return f"Client({self._label})"


class _Launch:
    """The state of the running program (one at a time: `stop` ends it)."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.errors: list[tuple[str, BaseException]] = []


_current: _Launch | None = None


def stop() -> None:
    """``lp.stop()``: end the running program (`launch` returns)."""
    if _current is not None:
        _current.stopped.set()


def launch(program: Program, **settings: Any) -> None:
    """``lp.launch``: build every node's object (module docstring), run them, return on
    `stop`. `settings` (``launch_type``, ``local_resources``, ``terminal``) are accepted and
    unused.

    Raises:
        RuntimeError: a program is already running, or a node's object could not be built
            or its ``run`` raised (the first such error is the cause).
    """
    global _current
    if _current is not None:
        raise RuntimeError("launchpad stand-in: a program is already running")
    state = _current = _Launch()
    logger.info("launching %s (%s) in one process", program.name, ", ".join(settings))
    pools: list[ThreadPoolExecutor] = []
    clients: dict[int, Client] = {}
    try:
        ordered = [n for n in program.nodes if isinstance(n[1], CourierNode)]
        ordered += [n for n in program.nodes if not isinstance(n[1], CourierNode)]
        for label, node in ordered:
            args, kwargs = _resolve((node.args, node.kwargs), clients)
            try:
                node.instance = node.constructor(*args, **kwargs)
            except Exception as error:
                raise RuntimeError(
                    f"launchpad stand-in: node {label} not built: {error!r}"
                ) from error
            if isinstance(node, CourierNode):
                pool = ThreadPoolExecutor(CALL_THREADS, thread_name_prefix=label)
                pools.append(pool)
                clients[id(node)] = Client(label, node.instance, pool)
        for label, node in ordered:
            run = getattr(node.instance, "run", None)
            if callable(run):
                threading.Thread(
                    target=_run_node, args=(label, run, state), name=label, daemon=True
                ).start()
        state.stopped.wait()
        if state.errors:
            label, error = state.errors[0]
            raise RuntimeError(f"launchpad stand-in: node {label} failed: {error!r}") from error
    finally:
        _current = None
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)


def _run_node(label: str, run: Callable[[], Any], state: _Launch) -> None:
    try:
        run()
    except BaseException as error:  # a node's failure ends the program, reported by launch
        logger.exception("node %s failed", label)
        state.errors.append((label, error))
        state.stopped.set()


def _resolve(value: Any, clients: dict[int, Client]) -> Any:
    """`value` with each `Handle` replaced by its node's `Client`, everything else deep
    copied (a node's arguments reach it pickled)."""
    memo: dict[int, Any] = {}
    for client_node_id, client in clients.items():
        for handle in _handles(value):
            if id(handle.node) == client_node_id:
                memo[id(handle)] = client
    missing = [h.label for h in _handles(value) if id(h) not in memo]
    if missing:
        raise RuntimeError(f"launchpad stand-in: no courier node built yet for {missing}")
    return copy.deepcopy(value, memo)


def _handles(value: Any) -> Iterator[Handle]:
    if isinstance(value, Handle):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _handles(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _handles(item)


# --------------------------------------------------------------------------------------
# pyarrow.plasma
# --------------------------------------------------------------------------------------


class ObjectID:
    """``plasma.ObjectID``: the id of one stored object (``binary()``: its bytes)."""

    def __init__(self, binary: bytes) -> None:
        self._binary = bytes(binary)

    def binary(self) -> bytes:
        return self._binary

    def __hash__(self) -> int:
        return hash(self._binary)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectID) and other._binary == self._binary


class PlasmaStore:
    """One store: bytes by `ObjectID`, at most `capacity` bytes at a time (Plasma's
    ``plasma_store_memory``). Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._objects: dict[ObjectID, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes) -> ObjectID:
        """Store `data`; its new id.

        Raises:
            MemoryError: the store would hold more than its capacity.
        """
        with self._lock:
            used = sum(len(v) for v in self._objects.values())
            if used + len(data) > self.capacity:
                raise MemoryError(
                    f"plasma stand-in: {len(data)} bytes do not fit ({used} of "
                    f"{self.capacity} used); raise Oat's shm_size_mb"
                )
            object_id = ObjectID(uuid.uuid4().bytes + b"\0" * 4)  # Plasma's ids are 20 bytes
            self._objects[object_id] = bytes(data)
            return object_id

    def get(self, object_id: ObjectID) -> bytes:
        with self._lock:
            return self._objects[object_id]

    def delete(self, object_ids: tuple[ObjectID, ...] | list[ObjectID]) -> None:
        with self._lock:
            for object_id in object_ids:
                self._objects.pop(object_id, None)


_stores: dict[str, PlasmaStore] = {}


@contextmanager
def start_plasma_store(plasma_store_memory: int) -> Iterator[tuple[str, None]]:
    """``plasma.start_plasma_store``: a new store of `plasma_store_memory` bytes for the
    block; yields its path and None (no store process: Oat's server loop then only waits
    for ``halt``)."""
    path = f"inprocess-plasma-{uuid.uuid4().hex}"
    _stores[path] = PlasmaStore(plasma_store_memory)
    try:
        yield path, None
    finally:
        del _stores[path]


def connect(path: str) -> PlasmaStore:
    """``plasma.connect``: the store at `path`.

    Raises:
        KeyError: no store was started at `path` in this process.
    """
    return _stores[path]


# --------------------------------------------------------------------------------------


def stand_in_modules() -> dict[str, types.ModuleType]:
    """The stand-in modules by the names Oat imports: ``launchpad``, ``launchpad.nodes``,
    ``launchpad.nodes.python``, ``launchpad.nodes.python.local_multi_processing`` and
    ``pyarrow.plasma``."""
    this = sys.modules[__name__]
    process = types.ModuleType("launchpad.nodes.python.local_multi_processing")
    process.PythonProcess = PythonProcess  # type: ignore[attr-defined]
    python = types.ModuleType("launchpad.nodes.python")
    python.local_multi_processing = process  # type: ignore[attr-defined]
    nodes = types.ModuleType("launchpad.nodes")
    nodes.python = python  # type: ignore[attr-defined]
    launchpad = types.ModuleType("launchpad")
    for name in ("Program", "CourierNode", "PyClassNode", "launch", "stop"):
        setattr(launchpad, name, getattr(this, name))
    launchpad.nodes = nodes  # type: ignore[attr-defined]
    plasma = types.ModuleType("pyarrow.plasma")
    for name in ("ObjectID", "connect", "start_plasma_store"):
        setattr(plasma, name, getattr(this, name))
    return {
        "launchpad": launchpad,
        "launchpad.nodes": nodes,
        "launchpad.nodes.python": python,
        "launchpad.nodes.python.local_multi_processing": process,
        "pyarrow.plasma": plasma,
    }


def install() -> None:
    """Make ``import launchpad`` and ``from pyarrow import plasma`` give these stand-ins, in
    this process, for good (the launch process of a run)."""
    import pyarrow

    modules = stand_in_modules()
    sys.modules.update(modules)
    pyarrow.plasma = modules["pyarrow.plasma"]  # type: ignore[attr-defined]
