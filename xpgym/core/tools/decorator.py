'''`@tool`: a plain Python function (sync or async) becomes a `Tool`.

::

    @tool
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. "2 * (3 + 4)".
        """
        return str(safe_eval(expression))

The tool's name is the function's (or `name`), its description the docstring's first
paragraph (or `description`), its JSON schema inferred from the type hints and the
docstring (`xpgym.core.tools.signature.signature_schema`). The model calls it with
``<tool_call>{"name": "calculator", "arguments": {"expression": "1+2"}}</tool_call>``;
arguments that do not match the schema give an invalid-call observation without running the
function. With `tag` (and `tag_argument`, needed when the function has several parameters)
it also accepts ``<calc>1+2</calc>``.

Results: a `str` is the observation, `None` gives ``""``, anything else is written with
`json.dumps` (a value JSON cannot hold is a bug of the tool: `TypeError`); the observation is
cut to `max_output_chars`. An exception raised by the function gives ``ok=False`` and the
observation ``"Error: <Type>: <message>"`` (`ToolError` gives its message alone); the
traceback is logged at DEBUG, never shown to the model.

Async functions: `FunctionTool.aexecute` awaits them on the caller's loop; `execute` runs
them on a fresh event loop, in the calling thread when no loop runs there, else in a worker
thread (the calling thread blocks until it is done; in async code call `aexecute`). A
coroutine therefore must not use objects bound to another event loop when run through
`execute`. `timeout_s` (async functions only) cancels a call that runs longer
(`asyncio.wait_for`) and gives ``ok=False``. A sync function cannot be given `timeout_s`:
a Python thread cannot be killed, and a timeout that leaves the function running would only
pretend; run such work in a subprocess or the sandbox (`xpgym.core.tools.python`).

Injected parameters (left out of the schema, filled at call time):

* ``@tool(env=EnvClass)``: the parameter annotated with `EnvClass`, or else the one named
  ``env``, gets the episode's env: `bind` finds the first env of the chain that is an
  instance of `EnvClass` (`ToolEnvWrapper` binds its tools when it is built). A tool whose
  env class is not in the chain raises `TypeError` there.
* ``@tool(resource=pool)``: the parameter named ``resource`` gets a resource leased from the
  `xpgym.core.resources.ResourcePool` for the whole episode: the bound tool acquires a lease
  in `start_episode` (`ToolEnvWrapper.reset`) and releases it in `end_episode` (the
  episode's end, the next reset, close). The reset info and every call's info hold
  ``resource_wait_s`` (how long this episode waited for its lease). A lease reclaimed by the
  pool's `lease_timeout_s` gives ``ok=False`` with the infrastructure marker.

A `FunctionTool` without `env` or `resource` is stateless and thread-safe; `bind` returns it
unchanged. With either, `bind` returns a copy for one wrapper; the decorated object itself is
never bound and can be shared.
'''

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import json
import logging
import time
import types
import typing
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from xpgym.core.errors import INFRA_ERROR_KEY, InfraCause
from xpgym.core.text import shorten_end
from xpgym.core.tools.base import Tool, ToolCall, ToolResult
from xpgym.core.tools.calls import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, function_schema, parse_call
from xpgym.core.tools.signature import signature_schema

if TYPE_CHECKING:
    from xpgym.core.env import EnvCore
    from xpgym.core.resources import Lease, ResourcePool

__all__ = ["FunctionTool", "ToolError", "tool"]

logger = logging.getLogger(__name__)

RESOURCE_PARAMETER = "resource"
"""The name of the parameter that receives the leased resource of ``@tool(resource=...)``."""

_TRUNCATED = " ... [truncated]"


class ToolError(Exception):
    """Raise it in a tool function to fail the call with exactly this message as the
    observation (other exceptions show their type too)."""


class FunctionTool(Tool):
    """A `Tool` that calls a Python function; see the module docstring. Made by `tool`.

    Args:
        fn: The function (sync or ``async def``).
        name: The tool name (default: ``fn.__name__``).
        description: Shown to the model (default: the docstring's first paragraph).
        env: Env class whose instance is injected (see the module docstring).
        resource: Pool whose resource is injected into the parameter ``resource``.
        timeout_s: Limit of one call of an async function.
        max_output_chars: Cap on the observation (the cut ends with ``" ... [truncated]"``).
        tag: Also accept ``<tag>content</tag>``; the content fills `tag_argument`.
        tag_argument: The string parameter the tag content fills (default: the only
            parameter).

    Raises:
        TypeError: the schema cannot be inferred (`signature_schema`), an `env` or
            `resource` without its parameter, or `fn` is not callable.
        ValueError: `timeout_s` on a sync function or not positive, `max_output_chars` too
            small, or a tag format that cannot fill the function's required parameters.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        env: type[EnvCore] | None = None,
        resource: ResourcePool[Any] | None = None,
        timeout_s: float | None = None,
        max_output_chars: int = 4000,
        tag: str | None = None,
        tag_argument: str | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"@tool needs a function, got {fn!r:.80}")
        label = getattr(fn, "__qualname__", repr(fn))
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        if timeout_s is not None and not self.is_async:
            raise ValueError(
                f"{label}: timeout_s applies to async functions only; a thread running a sync "
                "function cannot be stopped (run the work in a subprocess or the sandbox)"
            )
        if timeout_s is not None and not timeout_s > 0:
            raise ValueError(f"{label}: timeout_s must be > 0, got {timeout_s!r}")
        if max_output_chars <= len(_TRUNCATED):
            raise ValueError(f"{label}: max_output_chars must be > {len(_TRUNCATED)}")
        parameters = inspect.signature(fn).parameters
        self.env_class = env
        self.env_parameter = _env_parameter(fn, env, label) if env is not None else None
        self.resource_pool = resource
        # A leased resource's contents (a scratch database) are in no env snapshot.
        self.forkable = resource is None
        if resource is not None and RESOURCE_PARAMETER not in parameters:
            raise TypeError(f"{label}: @tool(resource=...) needs a parameter named 'resource'")
        skip = {"self", self.env_parameter, RESOURCE_PARAMETER if resource is not None else None}
        schema = signature_schema(
            fn, name=name, description=description, skip={s for s in skip if s}
        )["function"]
        self.name = schema["name"]
        self.description = schema["description"]
        self.parameters: dict[str, Any] = schema["parameters"]
        self.timeout_s = timeout_s
        self.max_output_chars = int(max_output_chars)
        self.tag = tag
        self.tag_argument = _tag_argument(self.parameters, tag, tag_argument, label)
        self._env: EnvCore | None = None
        self._lease: Lease[Any] | None = None
        self._bound = False

    # ------------------------------------------------------------------ the Tool contract

    def instructions(self) -> str:
        """The description, the JSON call form with its schema, and the tag form if any."""
        lines = [
            f"Function {self.name}: {self.description}",
            f"Arguments (JSON schema): {json.dumps(self.parameters, ensure_ascii=False)}",
            f'Call it with {TOOL_CALL_OPEN}{{"name": "{self.name}", "arguments": {{...}}}}'
            f"{TOOL_CALL_CLOSE}",
        ]
        if self.tag is not None:
            lines.append(f"or with <{self.tag}>{self.tag_argument}</{self.tag}>.")
        return "\n".join(lines)

    def function_schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.parameters)

    def parse(self, action: str) -> ToolCall | None:
        return parse_call(
            action,
            self.name,
            parameters=self.parameters,
            tag=self.tag,
            tag_argument=self.tag_argument,
        )

    def execute(self, call: ToolCall) -> ToolResult:
        """Call the function with ``call.arguments``; see the module docstring.

        Raises:
            ValueError: `call` is malformed (``call.error`` set).
            RuntimeError: an env or resource tool used without `bind` / `start_episode`.
            TypeError: the function returned a value JSON cannot hold.
        """
        arguments, failed = self._arguments(call)
        if failed is not None:
            return failed
        start = time.perf_counter()
        if self.is_async:
            return _run_coroutine(self._acall(arguments, start))
        try:
            value = self.fn(**arguments)
        except Exception as exc:
            return self._failure(exc, start)
        return self._success(value, start)

    async def aexecute(self, call: ToolCall) -> ToolResult:
        """Await an async function on the running loop; a sync one runs in a worker thread."""
        if not self.is_async:
            return await super().aexecute(call)
        arguments, failed = self._arguments(call)
        if failed is not None:
            return failed
        return await self._acall(arguments, time.perf_counter())

    # ------------------------------------------------------------------ calling

    def _arguments(self, call: ToolCall) -> tuple[dict[str, Any], ToolResult | None]:
        """The keyword arguments of a call, the injected ones included, or a failed result."""
        if call.error is not None:
            raise ValueError(f"cannot execute a malformed call: {call.error}")
        arguments = dict(call.arguments)
        if self.env_parameter is not None:
            if self._env is None:
                raise RuntimeError(
                    f"tool {self.name!r} needs an env: put it in a ToolEnvWrapper or use "
                    "tool.bind([env])"
                )
            arguments[self.env_parameter] = self._env
        if self.resource_pool is not None:
            if self._lease is None:
                raise RuntimeError(
                    f"tool {self.name!r} holds no resource: use it in a ToolEnvWrapper, or "
                    "call bind(...) and start_episode() first"
                )
            try:
                arguments[RESOURCE_PARAMETER] = self._lease.resource
            except RuntimeError as exc:  # the lease expired or its pool closed
                message = f"{type(exc).__name__}: {exc}"
                return arguments, ToolResult(
                    f"Tool {self.name!r} failed: its backend is gone ({message}).",
                    ok=False,
                    info={
                        **self._lease_info(),
                        "exit_reason": "error",
                        INFRA_ERROR_KEY: InfraCause("tool_backend_error", message).to_dict(),
                    },
                )
        return arguments, None

    async def _acall(self, arguments: dict[str, Any], start: float) -> ToolResult:
        coroutine = typing.cast(Awaitable[Any], self.fn(**arguments))
        try:
            if self.timeout_s is None:
                value = await coroutine
            else:
                value = await asyncio.wait_for(coroutine, self.timeout_s)
        except asyncio.TimeoutError:
            return ToolResult(
                f"Error: tool {self.name!r} timed out after {self.timeout_s}s.",
                ok=False,
                info={**self._info(start), "exit_reason": "timeout"},
            )
        except Exception as exc:
            return self._failure(exc, start)
        return self._success(value, start)

    def _success(self, value: Any, start: float) -> ToolResult:
        if value is None:
            text = ""
        elif isinstance(value, str):
            text = value
        else:
            try:
                text = json.dumps(value, ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise TypeError(
                    f"tool {self.name!r} returned a {type(value).__name__} that JSON cannot "
                    "hold; return a str, None or JSON-compatible data"
                ) from exc
        shown = shorten_end(text, self.max_output_chars, marker=_TRUNCATED)
        info = {**self._info(start), "exit_reason": "ok", "output_truncated": shown != text}
        return ToolResult(shown, info=info)

    def _failure(self, exc: Exception, start: float) -> ToolResult:
        logger.debug("tool %r raised", self.name, exc_info=True)
        text = str(exc) if isinstance(exc, ToolError) else f"Error: {type(exc).__name__}: {exc}"
        return ToolResult(
            shorten_end(text, self.max_output_chars, marker=_TRUNCATED),
            ok=False,
            info={**self._info(start), "exit_reason": "error", "exception": type(exc).__name__},
        )

    def _info(self, start: float) -> dict[str, Any]:
        return {"duration_s": time.perf_counter() - start, **self._lease_info()}

    def _lease_info(self) -> dict[str, Any]:
        if self._lease is None:
            return {}
        return {"resource_wait_s": self._lease.wait_s, "resource_pool": self._lease.pool.name}

    # ------------------------------------------------------------------ episode hooks

    def bind(self, envs: Sequence[EnvCore]) -> FunctionTool:
        """`self` for a stateless tool; else a copy bound to the first env of `envs` that is
        an `env_class` and holding its own lease slot.

        Raises:
            TypeError: no env of `envs` is an instance of `env_class`.
        """
        if self.env_class is None and self.resource_pool is None:
            return self
        bound = copy.copy(self)
        bound._lease, bound._bound = None, True
        if self.env_class is not None:
            bound._env = next((e for e in envs if isinstance(e, self.env_class)), None)
            if bound._env is None:
                chain = " -> ".join(type(e).__name__ for e in envs) or "no env"
                raise TypeError(
                    f"tool {self.name!r} needs an env of class {self.env_class.__name__}, "
                    f"which is not in the env chain {chain}"
                )
        return bound

    def start_episode(self) -> Mapping[str, float]:
        """Lease this episode's resource (a resource tool): ``{"resource_wait_s": s}``.

        Raises:
            RuntimeError: called on a resource tool that was not bound.
            xpgym.core.resources.PoolClosedError, AcquireTimeoutError: from the pool.
        """
        if self.resource_pool is None:
            return {}
        if not self._bound:
            raise RuntimeError(f"tool {self.name!r}: bind() the tool before start_episode()")
        self.end_episode()
        self._lease = self.resource_pool.acquire(owner=f"tool {self.name!r}")
        return {"resource_wait_s": self._lease.wait_s}

    def end_episode(self) -> None:
        """Release this episode's lease, if any (idempotent)."""
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the plain function (so a decorated function can still be used directly)."""
        return self.fn(*args, **kwargs)

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> FunctionTool: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> Callable[..., Any]: ...

    def __get__(
        self, instance: object | None, owner: type | None = None
    ) -> FunctionTool | Callable[..., Any]:
        """``@tool`` on a method: the class's attribute is the tool, an instance's is the
        function bound to the instance, as for a plain method (``env.look_up(3)`` calls
        ``fn(env, 3)``)."""
        if instance is None:
            return self
        return types.MethodType(self.fn, instance)

    def __repr__(self) -> str:
        return f"FunctionTool(name={self.name!r})"


def _env_parameter(fn: Callable[..., Any], env_class: type, label: str) -> str:
    """The parameter that receives the env: annotated with `env_class`, else named ``env``."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that does not resolve: fall back to the name
        hints = {}
    names = list(inspect.signature(fn).parameters)
    annotated = [name for name in names if hints.get(name) is env_class]
    if len(annotated) > 1:
        raise TypeError(f"{label}: several parameters are annotated {env_class.__name__}")
    if annotated:
        return annotated[0]
    if "env" in names:
        return "env"
    raise TypeError(
        f"{label}: @tool(env={env_class.__name__}) needs a parameter annotated "
        f"{env_class.__name__} or named 'env'"
    )


def _tag_argument(
    parameters: Mapping[str, Any], tag: str | None, tag_argument: str | None, label: str
) -> str | None:
    """The parameter a tag call fills, checked against the schema."""
    if tag is None:
        if tag_argument is not None:
            raise ValueError(f"{label}: tag_argument without tag")
        return None
    properties = parameters.get("properties", {})
    if tag_argument is None:
        if len(properties) != 1:
            raise ValueError(f"{label}: tag={tag!r} needs tag_argument (several parameters)")
        tag_argument = next(iter(properties))
    if tag_argument not in properties:
        raise ValueError(f"{label}: tag_argument {tag_argument!r} is not a parameter")
    kind = properties[tag_argument].get("type", "string")
    if "string" not in ([kind] if isinstance(kind, str) else kind):
        raise ValueError(f"{label}: tag_argument {tag_argument!r} must take a string")
    other = [name for name in parameters.get("required", ()) if name != tag_argument]
    if other:
        raise ValueError(f"{label}: a <{tag}> call cannot fill the required parameters {other}")
    return tag_argument


def _run_coroutine(coroutine: Coroutine[Any, Any, ToolResult]) -> ToolResult:
    """Run `coroutine` to its end from sync code: on a new loop in this thread, or in a worker
    thread when a loop already runs in this one (it cannot be re-entered)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="xpgym-tool") as worker:
        return worker.submit(asyncio.run, coroutine).result()


@overload
def tool(fn: Callable[..., Any], /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    env: type[EnvCore] | None = None,
    resource: ResourcePool[Any] | None = None,
    timeout_s: float | None = None,
    max_output_chars: int = 4000,
    tag: str | None = None,
    tag_argument: str | None = None,
) -> Callable[[Callable[..., Any]], FunctionTool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    **options: Any,
) -> FunctionTool | Callable[[Callable[..., Any]], FunctionTool]:
    """Make a `FunctionTool` of `fn`: ``@tool`` or ``@tool(name=..., env=..., ...)``.

    The options are `FunctionTool`'s; see the module docstring.
    """
    if fn is not None:
        return FunctionTool(fn, **options)
    return lambda function: FunctionTool(function, **options)
