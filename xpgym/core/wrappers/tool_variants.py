"""Tool variants of registered envs: ``<base id>-<toolset>``, the env in `ToolEnvWrapper`.

Id convention
-------------

A tool variant of a registered env appends one lowercase *toolset* name to the base id:
``<base id>-<toolset>``, e.g. ``game:GuessTheNumber-v0-python``,
``game:GuessTheNumber-v0-easy-python`` (the ``-easy`` variant with the Python tool) or
``math:GSM8K-v0-python``. The toolset name is one token, ``[a-z][a-z0-9_]*``: tools used
together are joined with underscores in the order they are listed, e.g. ``python_search``
(so the toolset is always the part after the last dash). The variant keeps the base id's
category, name and version; a behaviour change in the base env or in the toolset gets a new
version of the variant's base id, as for any env.

What a variant builds
---------------------

``xpgym.make("<base id>-<toolset>", **env_kwargs)`` makes the base env (with `env_kwargs`
passed to it), calls the tools factory for fresh tool instances (never shared between envs,
unlike GEM's tools created at import) and wraps the env in `ToolEnvWrapper` with the
registered wrapper options and ``close_tools=True``. Two keyword arguments are reserved for
the variant itself: ``wrapper_kwargs`` (replaces the registered wrapper options) and
``tools_kwargs`` (replaces the registered factory arguments).

Entry points stay lazy and picklable: the registered entry point is the string
``"xpgym.core.wrappers.tool_variants:make_tool_env"`` and the spec's kwargs hold only plain data
(the base id, the base entry point and kwargs, a ``"module:attr"`` factory string or a
module-level function), so `make_vec` with processes and ``xpgym list --json`` both work.
The base env is resolved when the variant is registered, so register the base id first.
"""

from __future__ import annotations

import inspect
import pickle
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xpgym.core.env import Env
from xpgym.core.registry import EnvSpec, load_entry_point, make_from_spec, register, spec
from xpgym.core.tools.base import Tool
from xpgym.core.wrappers.tools import ToolEnvWrapper

__all__ = ["ToolsFactory", "make_tool_env", "register_tool_variant", "tool_variant_id"]

ToolsFactory = Callable[..., "Tool | Sequence[Tool]"]
"""Returns fresh tools: one `Tool` or a sequence of them. Called once per env made."""

_TOOLSET = re.compile(r"[a-z][a-z0-9_]*")
_ENTRY_POINT = "xpgym.core.wrappers.tool_variants:make_tool_env"


def tool_variant_id(base_id: str, toolset_name: str) -> str:
    """The id of the `toolset_name` variant of `base_id`: ``f"{base_id}-{toolset_name}"``.

    Raises:
        ValueError: `toolset_name` is not one lowercase token (``[a-z][a-z0-9_]*``).
    """
    if not isinstance(toolset_name, str) or not _TOOLSET.fullmatch(toolset_name):
        raise ValueError(
            f"toolset name must match [a-z][a-z0-9_]* (join several tools with '_', e.g. "
            f"'python_search'), got {toolset_name!r}"
        )
    return f"{base_id}-{toolset_name}"


def _check_wrapper_kwargs(wrapper_kwargs: Mapping[str, Any]) -> None:
    params = inspect.signature(ToolEnvWrapper.__init__).parameters
    accepted = {name for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(wrapper_kwargs) - accepted)
    if unknown:
        raise TypeError(
            f"unknown ToolEnvWrapper option(s) {', '.join(map(repr, unknown))}; it accepts: "
            f"{', '.join(sorted(accepted))}"
        )


def _check_factory(tools_factory: str | ToolsFactory) -> None:
    if isinstance(tools_factory, str):
        if not re.fullmatch(r"[\w.]+:[\w.]+", tools_factory):
            raise ValueError(
                f"tools factory {tools_factory!r} must look like 'package.module:function'"
            )
        return
    if not callable(tools_factory):
        raise TypeError(
            f"tools_factory must be a 'module:function' string or a callable, got "
            f"{type(tools_factory).__name__}"
        )
    try:
        pickle.dumps(tools_factory)
    except Exception as exc:
        raise ValueError(
            f"tools factory {tools_factory!r} does not pickle ({exc}); use a module-level "
            "function or a 'module:function' string, not a lambda or a local function"
        ) from exc


def register_tool_variant(
    base_id: str,
    tools_factory: str | ToolsFactory,
    toolset_name: str,
    *,
    tools_kwargs: Mapping[str, Any] | None = None,
    description: str | None = None,
    override: bool = False,
    **wrapper_kwargs: Any,
) -> EnvSpec:
    """Register ``<base_id>-<toolset_name>``: the base env wrapped in `ToolEnvWrapper`.

    Args:
        base_id: A registered env id (aliases are resolved to the current id).
        tools_factory: ``"package.module:function"`` (imported when an env is made) or a
            module-level function; called with `tools_kwargs`, it returns fresh tools.
        toolset_name: One lowercase token naming the tools, e.g. ``"python"`` or
            ``"python_search"``; see the module docstring.
        tools_kwargs: Keyword arguments for the factory (e.g. ``{"timeout_s": 5}``).
        description: One line for listings; default: the base's plus ``" Tools: <toolset>."``
        override: Replace an existing registration of the variant id.
        **wrapper_kwargs: `ToolEnvWrapper` options (``max_tool_calls``,
            ``tool_call_reward``, ...), checked now.

    The variant inherits the base's `EnvSpec.requires_download`.

    Returns:
        The registered `EnvSpec`.

    Raises:
        UnknownEnvError: `base_id` is not registered.
        ValueError: bad toolset name, a factory that does not pickle, or the id is taken.
        TypeError: an unknown wrapper option.
    """
    variant_id = tool_variant_id(base_id, toolset_name)
    base = spec(base_id)
    _check_factory(tools_factory)
    _check_wrapper_kwargs(wrapper_kwargs)
    if description is None:
        description = f"{base.description} Tools: {toolset_name}.".strip()
    return register(
        variant_id,
        _ENTRY_POINT,
        override=override,
        description=description,
        requires_download=base.requires_download,
        base_id=base.id,
        base_entry_point=base.entry_point,
        base_kwargs=dict(base.kwargs),
        tools_factory=tools_factory,
        tools_kwargs=dict(tools_kwargs or {}),
        wrapper_kwargs=dict(wrapper_kwargs),
    )


def make_tool_env(
    *,
    base_id: str,
    base_entry_point: str | Callable[..., Any],
    base_kwargs: Mapping[str, Any] | None = None,
    tools_factory: str | ToolsFactory,
    tools_kwargs: Mapping[str, Any] | None = None,
    wrapper_kwargs: Mapping[str, Any] | None = None,
    **env_kwargs: Any,
) -> Any:
    """Entry point of every tool variant (see the module docstring); returns the wrapped env.

    The base env is built from its registered entry point and kwargs (`env_kwargs` override
    them), the tools from ``tools_factory(**tools_kwargs)``.

    Raises:
        TypeError: the base env is multi-agent, or the factory returned something other
            than tools.
    """
    base_spec = EnvSpec(base_id, base_entry_point, dict(base_kwargs or {}))
    env = make_from_spec(base_spec, **env_kwargs)
    try:
        if not isinstance(env, Env):
            raise TypeError(f"tool variants wrap single-agent envs; {base_id!r} is multi-agent")
        made = load_entry_point(tools_factory)(**dict(tools_kwargs or {}))
        tools = [made] if isinstance(made, Tool) else made
        if not isinstance(tools, Sequence) or not all(isinstance(t, Tool) for t in tools):
            raise TypeError(
                f"tools factory {tools_factory!r} must return a Tool or a sequence of Tools, "
                f"got {made!r:.120}"
            )
        options = {"close_tools": True, **dict(wrapper_kwargs or {})}
        return ToolEnvWrapper(env, tools, **options)
    except BaseException:
        env.close()
        raise
