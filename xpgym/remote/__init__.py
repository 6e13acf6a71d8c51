"""Remote envs: serve xpgym envs over HTTP and use them through the `Env` API.

* Server: ``python -m xpgym serve --env 'game:*' --port 8000`` (or `serve`, `create_app`,
  `BackgroundServer`); the protocol is documented in `xpgym.remote.server`.
* Client: ``xpgym.make("remote:http://127.0.0.1:8000/game:GuessTheNumber-v0")`` or
  `RemoteEnv` directly; failure handling is documented in `xpgym.remote.client`.

The server side needs ``starlette`` and ``uvicorn``; the client only the standard library.
"""

from xpgym.remote.client import RemoteEnv, RemoteEnvError, parse_remote_id, remote_spec

__all__ = [
    "BackgroundServer",
    "EnvServer",
    "RemoteEnv",
    "RemoteEnvError",
    "create_app",
    "parse_remote_id",
    "remote_spec",
    "serve",
]


def __getattr__(name: str) -> object:
    # The server pulls in starlette/uvicorn: import it only when asked for.
    if name in ("BackgroundServer", "EnvServer", "create_app", "serve"):
        from xpgym.remote import server

        return getattr(server, name)
    raise AttributeError(f"module 'xpgym.remote' has no attribute {name!r}")
