"""Registry of environment ids: `register`, `make`, `make_vec`, `list_envs`.

Ids have the form ``category:Name-vN[-variant]``, e.g. ``game:GuessTheNumber-v0-easy``.
A change of behaviour gets a new version number.

A *family* (`register_family`) is a whole category whose ids are enumerated lazily, e.g. the
``rg:`` ids, one per task of the optional package ``reasoning_gym``: its specs are built the
first time one of its ids is looked up, or listed with a pattern that names the category.

An id *scheme* (`register_scheme`) hands every id ``"<scheme>:..."`` to a resolver of the
package that owns it, e.g. ``remote:http://host:8000/game:GuessTheNumber-v0`` to
`xpgym.remote`: the registry knows no scheme itself and imports no package for one.

Entry points are given as ``"package.module:Attr"`` strings and imported only when an env
is made, so registering hundreds of envs costs no imports.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import functools
import importlib
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from xpgym.core.env import ENV_ID_PATTERN, Env, EnvCore, EnvSpec

if TYPE_CHECKING:
    from xpgym.core.multiagent import MultiAgentEnv
    from xpgym.core.vector import VectorEnv

__all__ = [
    "EnvSpec",
    "UnknownEnvError",
    "list_envs",
    "load_entry_point",
    "make",
    "make_from_spec",
    "make_vec",
    "register",
    "register_family",
    "register_scheme",
    "registry",
    "spec",
]


class UnknownEnvError(KeyError):
    """Raised by `make` and `spec` for an id that is not registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


logger = logging.getLogger(__name__)
_T = TypeVar("_T")

registry: dict[str, EnvSpec] = {}
"""All registered specs by id. Read it through `spec` and `list_envs`."""

_families: dict[str, str | Callable[[], Iterable[EnvSpec]]] = {}
_family_specs: dict[str, dict[str, EnvSpec]] = {}
_schemes: dict[str, str | Callable[[str], EnvSpec]] = {}
_CATEGORY = re.compile(r"[a-z][a-z0-9_]*")


def register(
    id: str,
    entry_point: str | Callable[..., Env],
    *,
    override: bool = False,
    description: str = "",
    requires_download: bool = False,
    **kwargs: Any,
) -> EnvSpec:
    """Register an env id.

    Args:
        id: ``category:Name-vN[-variant]`` (lowercase category, `N` an integer).
        entry_point: ``"module:Attr"`` or a callable returning an `Env`.
        override: Replace an existing registration instead of raising.
        description: One-line summary for listings.
        requires_download: The env fetches data from the network when made (see `EnvSpec`).
        **kwargs: Default keyword arguments for the entry point.

    Raises:
        ValueError: malformed id, malformed entry point string, or the id is taken and
            `override` is false.
    """
    if not ENV_ID_PATTERN.match(id):
        raise ValueError(
            f"env id {id!r} does not match 'category:Name-vN[-variant]' "
            "(e.g. 'game:GuessTheNumber-v0-easy')"
        )
    if isinstance(entry_point, str) and not re.fullmatch(r"[\w.]+:[\w.]+", entry_point):
        raise ValueError(f"entry point {entry_point!r} must look like 'package.module:Attr'")
    if not isinstance(entry_point, str) and not callable(entry_point):
        raise TypeError(f"entry point for {id!r} must be a 'module:Attr' string or a callable")
    _check_not_a_scheme(id.partition(":")[0])
    if id in registry and not override:
        raise ValueError(f"env id {id!r} is already registered; pass override=True to replace it")
    env_spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        kwargs=kwargs,
        description=description,
        requires_download=requires_download,
    )
    registry[id] = env_spec
    return env_spec


def register_family(
    category: str, specs: str | Callable[[], Iterable[EnvSpec]], *, override: bool = False
) -> None:
    """Register a family: the ids of `category` that `specs` enumerates, built lazily.

    `specs` is called (imported first when it is a ``"module:function"`` string) at most
    once per process, when an id ``"<category>:..."`` that is not in `registry` is looked up
    (`make`, `spec`, `make_vec`) or when `list_envs` gets a pattern containing
    ``"<category>:"`` (e.g. ``"rg:*"``; the command line's ``xpgym list rg:``). Nothing is
    imported before that, so a family can list the tasks of an optional package without
    making ``import xpgym`` import it. The trade-off: `list_envs()` without a pattern, other
    patterns (``"*letter*"``) and the env table of docs/envs.md do not show the family's ids. Ids in
    `registry` take precedence over the family's. If `specs` raises (e.g. `ImportError` for
    a missing package), the error propagates and the next lookup calls it again.

    Args:
        category: The ids' category, the part before ``":"`` (e.g. ``"rg"``).
        specs: Returns the family's `EnvSpec`s; each id must be a valid id of `category`.
        override: Replace an existing family of the same category instead of raising.

    Raises:
        ValueError: `category` is malformed or already has a family and `override` is false.
    """
    if not _CATEGORY.fullmatch(category):
        raise ValueError(f"family category {category!r} must match [a-z][a-z0-9_]*")
    if category in _families and not override:
        raise ValueError(f"a family for {category!r} is registered; pass override=True")
    _check_not_a_scheme(category)
    _families[category] = specs
    _family_specs.pop(category, None)


def register_scheme(
    scheme: str, resolver: str | Callable[[str], EnvSpec], *, override: bool = False
) -> None:
    """Hand every id ``"<scheme>:..."`` to `resolver`, which returns the id's `EnvSpec`.

    A scheme lets a package outside the core make ids of its own form resolvable: `make`,
    `spec` and `make_vec` call ``resolver(env_id)`` with the whole id for any id that starts
    with ``"<scheme>:"``, before registered ids and families are looked at. The
    rest of the id need not look like ``Name-vN`` (``remote:http://host:8000/game:X-v0``);
    the resolver raises `ValueError` for one it cannot read, and should return a spec with a
    string entry point so that `make_vec` with processes can pickle it. `list_envs` does not
    list scheme ids (they name envs elsewhere, e.g. on a server).

    Give `resolver` as a ``"module:function"`` string to keep registration free: it is
    imported the first time an id of the scheme is looked up. That is how the core stays
    free of the packages that own schemes: `xpgym.remote.register_remote_scheme` (called by
    `import xpgym`) registers ``"xpgym.remote.client:remote_spec"`` for ``remote:``, so the
    HTTP client is imported by the first remote id, and the registry imports nothing of it.

    Args:
        scheme: The part before the first ``":"``, ``[a-z][a-z0-9_]*`` (e.g. ``"remote"``).
        resolver: ``"module:function"`` or a callable taking the id and returning its spec.
        override: Replace an existing registration of `scheme` instead of raising.

    Raises:
        ValueError: `scheme` or the resolver string is malformed, `scheme` is registered
            already (and `override` is false), or it is the category of registered ids or of
            a family (their ids would become unreachable).
    """
    if not _CATEGORY.fullmatch(scheme):
        raise ValueError(f"id scheme {scheme!r} must match [a-z][a-z0-9_]*")
    if isinstance(resolver, str) and not re.fullmatch(r"[\w.]+:[\w.]+", resolver):
        raise ValueError(f"scheme resolver {resolver!r} must look like 'package.module:function'")
    if not isinstance(resolver, str) and not callable(resolver):
        raise TypeError(f"resolver of scheme {scheme!r} must be a 'module:function' or a callable")
    if scheme in _schemes and not override:
        raise ValueError(f"id scheme {scheme!r} is registered; pass override=True to replace it")
    taken = [i for i in registry if i.partition(":")[0] == scheme]
    if taken or scheme in _families:
        what = f"registered ids ({taken[0]!r}, ...)" if taken else "a family"
        raise ValueError(f"{scheme!r} cannot be an id scheme: it is the category of {what}")
    _schemes[scheme] = resolver


def _check_not_a_scheme(category: str) -> None:
    if category in _schemes:
        raise ValueError(
            f"{category!r} is an id scheme (register_scheme): its ids go to the scheme's "
            "resolver, so it cannot be a category of registered ids or families"
        )


def _family(category: str) -> dict[str, EnvSpec]:
    """The specs of `category`'s family by id (built on first use, then cached)."""
    if category not in _family_specs:
        specs: dict[str, EnvSpec] = {}
        for env_spec in load_entry_point(_families[category])():
            match = ENV_ID_PATTERN.match(env_spec.id)
            if match is None or match["category"] != category:
                raise ValueError(f"family {category!r} produced the id {env_spec.id!r}")
            specs[env_spec.id] = env_spec
        _family_specs[category] = specs
    return _family_specs[category]


def spec(env_id: str) -> EnvSpec:
    """The `EnvSpec` registered under `env_id`.

    Raises:
        UnknownEnvError: with the closest registered ids.
    """
    return _lookup(env_id)


def _lookup(env_id: str) -> EnvSpec:
    """`spec`'s body: a scheme's resolver, then registered ids, then the id's family."""
    scheme = env_id.partition(":")[0] if isinstance(env_id, str) else None
    if scheme in _schemes:
        return load_entry_point(_schemes[scheme])(env_id)
    if env_id in registry:
        return registry[env_id]
    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str, got {type(env_id).__name__}")
    known = list(registry)
    category = env_id.partition(":")[0]
    if category in _families:
        family = _family(category)
        if env_id in family:
            return family[env_id]
        known += list(family)
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
    if not close:  # e.g. 'game:GuessTheNumber' without version: match on the prefix
        close = sorted(k for k in known if k.lower().startswith(env_id.lower()))[:3]
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    if not ENV_ID_PATTERN.match(env_id) and all(k.partition(":")[0] != category for k in known):
        schemes = ", ".join(f"'{s}:'" for s in sorted(_schemes)) or "none"
        hint += f"; {category!r} is neither an env category nor an id scheme (schemes: {schemes})"
    raise UnknownEnvError(f"unknown env id {env_id!r}{hint} (see `python -m xpgym list`)")


def load_entry_point(entry_point: str | Callable[..., _T]) -> Callable[..., _T]:
    """Import a ``"module:Attr"`` entry point (or return a callable unchanged).

    What an imported attribute returns is not checked here; callers check what they get.
    """
    if not isinstance(entry_point, str):
        return entry_point
    module_name, _, attr_path = entry_point.partition(":")
    module = importlib.import_module(module_name)
    target: Any = module
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ImportError(
                f"entry point {entry_point!r}: {module_name} has no {attr_path}"
            ) from None
    return target


def _check_kwargs(
    env_spec: EnvSpec, factory: Callable[..., Env], kwargs: Mapping[str, Any]
) -> None:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    accepted = {
        p.name
        for p in params
        if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    }
    unknown = sorted(set(kwargs) - accepted)
    if unknown:
        raise TypeError(
            f"env {env_spec.id!r} ({env_spec.entry_point_name()}) got unexpected keyword "
            f"argument(s) {', '.join(map(repr, unknown))}; it accepts: "
            f"{', '.join(sorted(accepted)) or 'none'}"
        )


def make(env_id: str, **kwargs: Any) -> Env | MultiAgentEnv:
    """Build the env registered under `env_id`.

    Args:
        env_id: A registered id (or an id of a registered family or scheme).
        **kwargs: Override the spec's default keyword arguments. Names the entry point does
            not accept raise `TypeError` listing the accepted ones.

    Returns:
        The env, with `env.spec` set (its kwargs include the overrides). Call `reset()`
        before stepping it.
    """
    return make_from_spec(_lookup(env_id), **kwargs)


def make_from_spec(env_spec: EnvSpec, **kwargs: Any) -> Env | MultiAgentEnv:
    """Build an env from an `EnvSpec` (which need not be registered in this process)."""
    factory = load_entry_point(env_spec.entry_point)
    merged = {**env_spec.kwargs, **kwargs}
    _check_kwargs(env_spec, factory, merged)
    env = factory(**merged)
    if not isinstance(env, EnvCore):
        raise TypeError(
            f"entry point {env_spec.entry_point_name()} of {env_spec.id!r} returned "
            f"{type(env).__name__}, not an xpgym Env or MultiAgentEnv"
        )
    if kwargs:
        env_spec = dataclasses.replace(env_spec, kwargs=merged)
    env.spec = env_spec
    return env


def _make_wrapped(
    env_spec: EnvSpec, wrappers: Sequence[Callable[[Env], Env]], kwargs: Mapping[str, Any]
) -> Env:
    env = make_from_spec(env_spec, **kwargs)
    if not isinstance(env, Env):
        env.close()
        raise TypeError(
            f"make_vec builds single-agent envs; {env_spec.id!r} is a {type(env).__name__} "
            "(a MultiAgentEnv): make it with xpgym.make and step it with a dict of actions"
        )
    for wrap in wrappers:
        env = wrap(env)
    return env


def make_vec(
    env_ids: str | Sequence[str],
    num_envs: int | None = None,
    *,
    vectorization_mode: str = "sync",
    wrappers: Sequence[Callable[[Env], Env]] = (),
    env_kwargs: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
    vector_kwargs: Mapping[str, Any] | None = None,
) -> VectorEnv:
    """Build a vector env over registered ids.

    Args:
        env_ids: One id repeated `num_envs` times, or one id per sub-env.
        num_envs: Number of sub-envs (required with a single id; default 1).
        vectorization_mode: ``"sync"`` (the calling thread), ``"thread"`` (a thread pool,
            for I/O-bound envs), ``"process"`` (worker processes, for CPU-bound envs) or
            ``"ray"`` (Ray actors; ``pip install "xpgym[ray]"``). ``"async"`` raises
            `ValueError` (Gymnasium's ``"async"`` is ``"process"`` here); how these names
            compare with Gymnasium's: `xpgym.core.vector`.
        wrappers: Callables applied to each sub-env in order (e.g. ``MaxTurns`` or a
            `functools.partial` of a wrapper class). With ``"process"`` they must pickle.
        env_kwargs: Keyword arguments for every sub-env, or one mapping per sub-env. The
            caller's mappings are never modified.
        vector_kwargs: Passed to the vector env class (e.g. ``autoreset_mode``,
            ``step_timeout``, ``num_workers``).

    Returns:
        The `VectorEnv` subclass `vectorization_mode` names.
    """
    from xpgym.core import vector  # vector imports registry users; keep the import lazy

    if isinstance(env_ids, str):
        ids = [env_ids] * (1 if num_envs is None else num_envs)
    else:
        ids = list(env_ids)
        if num_envs is not None and num_envs != len(ids):
            raise ValueError(f"num_envs={num_envs} but {len(ids)} env ids were given")
    if not ids:
        raise ValueError("make_vec needs at least one sub-env")
    # Resolve ids here: worker processes do not see ids registered at run time.
    specs = {env_id: spec(env_id) for env_id in set(ids)}
    if env_kwargs is None or isinstance(env_kwargs, Mapping):
        per_env: list[Mapping[str, Any]] = [dict(env_kwargs or {})] * len(ids)
    else:
        per_env = [dict(kw) for kw in env_kwargs]
        if len(per_env) != len(ids):
            raise ValueError(f"{len(per_env)} env_kwargs mappings for {len(ids)} sub-envs")
    env_fns = [
        functools.partial(_make_wrapped, specs[env_id], tuple(wrappers), kw)
        for env_id, kw in zip(ids, per_env, strict=True)
    ]
    backend = vector.vector_env_class(vectorization_mode)
    return backend(env_fns, **dict(vector_kwargs or {}))


def list_envs(
    pattern: str | None = None,
    *,
    include_families: bool = False,
) -> list[str]:
    """Registered ids, sorted, optionally filtered by a glob (``"game:*"``, ``"*-easy"``).

    A family's ids (`register_family`) are included when `pattern` contains
    ``"<category>:"`` (e.g. ``"rg:*"``), or for every family with `include_families`. The
    latter imports what the families need (e.g. ``reasoning_gym``); a family whose package is
    missing is then left out with a log message instead of raising.
    """
    ids = set(registry)
    for category in _families:
        if pattern is not None and f"{category}:" in pattern:
            ids.update(_family(category))
        elif include_families:
            try:
                ids.update(_family(category))
            except ImportError as exc:
                logger.info("family %r is not listed: %s", category, exc)
    return sorted(i for i in ids if pattern is None or fnmatch.fnmatchcase(i, pattern))
