"""Remote envs: serve xpgym envs over HTTP and use them through the `Env` API.

* Server: ``python -m xpgym serve --env 'game:*' --port 8000`` (or `serve`, `create_app`,
  `BackgroundServer`); the protocol is documented in `xpgym.remote.server`, who gets in and
  how much in `xpgym.remote.guard`.
* Client: ``xpgym.make("remote:http://127.0.0.1:8000/game:GuessTheNumber-v0")`` or
  `RemoteEnv` directly; failure handling is documented in `xpgym.remote.client`. Both ends
  read the bearer token from ``XPGYM_SERVER_TOKEN`` (`TOKEN_ENV`).
* Other projects' servers as xpgym envs: ``xpgym.make("openenv:http://HOST:PORT")``
  (`OpenEnvEnv`, `xpgym.remote.openenv_client`) and
  ``xpgym.make("ors:http://HOST:PORT/<env name>")`` (`ORSEnv`, `xpgym.remote.ors_client`).
  What the clients share (errors, HTTP connection, step-failure info, pickling) is in
  `xpgym.remote.transport`.

The ``remote:``, ``openenv:`` and ``ors:`` ids are this package's id schemes:
`register_remote_scheme` hands them to `remote_spec`, `openenv_spec` and `ors_spec` through
`xpgym.core.registry.register_scheme`, and `import xpgym` calls it, so the core never imports
this package. The resolvers are registered by name, and this package imports its modules on
first use, so that `import xpgym` imports neither the clients (the standard library's HTTP
client, ``websockets``) nor the server (``starlette`` and ``uvicorn``).
"""

from __future__ import annotations

import importlib

from xpgym.core.registry import register_scheme

__all__ = [
    "OPENENV_SCHEME",
    "ORS_SCHEME",
    "SCHEME",
    "TOKEN_ENV",
    "BackgroundServer",
    "EnvServer",
    "ORSEnv",
    "OpenEnvEnv",
    "RemoteEnv",
    "RemoteEnvError",
    "create_app",
    "openenv_spec",
    "ors_spec",
    "parse_openenv_id",
    "parse_ors_id",
    "parse_remote_id",
    "register_remote_scheme",
    "remote_spec",
    "serve",
]

SCHEME = "remote"
"""Remote ids are ``"remote:<server url>/<env id>"``."""

OPENENV_SCHEME = "openenv"
"""OpenEnv ids are ``"openenv:<server url>"`` (`xpgym.remote.openenv_client`)."""

ORS_SCHEME = "ors"
"""ORS ids are ``"ors:<server url>/<env name>"`` (`xpgym.remote.ors_client`)."""

TOKEN_ENV = "XPGYM_SERVER_TOKEN"
"""Environment variable with the server's bearer token, read by the ``serve`` command and by
`RemoteEnv` when no ``token=`` is given."""

# Name -> module, imported on first attribute access.
_LAZY = {
    "RemoteEnv": "xpgym.remote.client",
    "RemoteEnvError": "xpgym.remote.transport",
    "parse_remote_id": "xpgym.remote.client",
    "remote_spec": "xpgym.remote.client",
    "OpenEnvEnv": "xpgym.remote.openenv_client",
    "openenv_spec": "xpgym.remote.openenv_client",
    "parse_openenv_id": "xpgym.remote.openenv_client",
    "ORSEnv": "xpgym.remote.ors_client",
    "ors_spec": "xpgym.remote.ors_client",
    "parse_ors_id": "xpgym.remote.ors_client",
    "BackgroundServer": "xpgym.remote.server",
    "EnvServer": "xpgym.remote.server",
    "create_app": "xpgym.remote.server",
    "serve": "xpgym.remote.server",
}


def register_remote_scheme() -> None:
    """Make ``remote:``, ``openenv:`` and ``ors:`` ids resolvable by `xpgym.make`, `spec` and
    `make_vec`; imports nothing.

    `import xpgym` calls it once.
    """
    register_scheme(SCHEME, "xpgym.remote.client:remote_spec")
    register_scheme(OPENENV_SCHEME, "xpgym.remote.openenv_client:openenv_spec")
    register_scheme(ORS_SCHEME, "xpgym.remote.ors_client:ors_spec")


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'xpgym.remote' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
