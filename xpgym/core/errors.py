"""Infrastructure failures: what is not the policy's fault, and how it is marked.

This docstring is the home of the rule; other modules and docs point here.

An episode can end badly for two kinds of reasons. The **policy's** own doing is judged by
the env and rewarded as usual: a malformed action, a wrong answer, a tool call with bad
arguments or an unknown tool, a program the policy wrote that crashes or runs past its time,
CPU, memory or output limit in the sandbox, an MCP call that timed out on a server that
still answers, or that the tool answered with an error. **Infrastructure** failures are not
the policy's doing, and their reward says nothing about the policy (`INFRA_KINDS`): a
sub-env whose step raised or ran past its step timeout (``sub_env_crash``,
``sub_env_timeout``; an env must judge any text without raising), a remote env step that
failed (``remote_error``: 5xx, a dropped connection, an expired session), a grader that
timed out or failed (``grader_timeout``, ``grader_error``), a sandbox that could not run the
code (``sandbox_error``), a tool backend that broke (``tool_backend_error``: an MCP server
disconnected or unresponsive, a search backend's timeout, connection or HTTP error, a tool
that raised against its contract). Such an episode gets ``Episode.outcome == "infra_error"``
(`xpgym.core.trajectory`; its JSON adds ``"outcome"`` and ``"infra_error"``) and is kept out
of the gradient: trainers see it with loss mask 0, in a group of its own
(`xpgym.training.layouts`), and count it in their metrics; ``xpgym eval`` records it as
``"infra_error"``, apart from failures. A failing ``reset`` still raises.

Where a failure happens, the code that sees it marks it in one of two ways:

* raise `InfraError` (e.g. from an env's `step`): a vector env's failure isolation and the
  episode runner turn it into a truncated step whose info carries the marker;
* put the marker in the step's info, ``info["infra_error"] = {"kind": ..., "message":
  ...}`` (`InfraCause.to_dict`); a tool puts it in its ``ToolResult.info`` (the tool wrapper
  copies that into ``info["tool_calls"][0]["info"]``).

`find_infra_cause` reads a step's info and is what the episode recorder
(`xpgym.rollout.recorder`) calls on every step. It also treats the vector envs' failure report
``info["error"]`` (a sub-env whose step raised or timed out) as infrastructure, since an env
must judge any text action without raising. The recorder marks the turn, sets
``Episode.infra_error`` and ends the episode there (``truncated_reason = "infra_error"``
unless the env ended it); the episode runner turns an env step that raises into such a step.

This module imports nothing from xpgym.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "INFRA_ERROR_KEY",
    "INFRA_KINDS",
    "InfraCause",
    "InfraError",
    "find_infra_cause",
    "step_failure_info",
]

INFRA_ERROR_KEY = "infra_error"
"""The info key of the marker: ``info["infra_error"] = {"kind": str, "message": str}``."""

INFRA_KINDS: tuple[str, ...] = (
    "grader_timeout",
    "grader_error",
    "sub_env_crash",
    "sub_env_timeout",
    "remote_error",
    "sandbox_error",
    "tool_backend_error",
)
"""The kinds xpgym raises; other kinds are accepted (a user's env may name its own)."""


@dataclass(frozen=True)
class InfraCause:
    """Why an episode failed for a reason that is not the policy's.

    Attributes:
        kind: What failed, one of `INFRA_KINDS` or a non-empty name of the env's own.
        message: What happened, for people (the error text, the status code).
    """

    kind: str
    message: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise ValueError(f"InfraCause.kind must be a non-empty str, got {self.kind!r}")
        if not isinstance(self.message, str):
            raise TypeError(f"InfraCause.message must be a str, got {self.message!r:.60}")

    def to_dict(self) -> dict[str, str]:
        """``{"kind": kind, "message": message}`` (the info marker and the JSON form)."""
        return {"kind": self.kind, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InfraCause:
        """Inverse of `to_dict`; unknown keys raise `ValueError`."""
        unknown = set(data) - {"kind", "message"}
        if unknown:
            raise ValueError(f"unknown InfraCause fields {sorted(unknown)}")
        return cls(**data)


class InfraError(Exception):
    """Raised where an infrastructure failure happens (see the module docstring).

    Args:
        kind: `InfraCause.kind`.
        message: `InfraCause.message`.

    Attributes:
        cause: The `InfraCause`.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.cause = InfraCause(kind, message)


def step_failure_info(exc: BaseException) -> dict[str, Any]:
    """The info of a step that raised `exc` (vector envs' failure isolation, the episode
    runner): ``{"error": "<Type>: <message>", "traceback": str, "infra_error": {...}}``.

    The marker is the `InfraError`'s cause; a ``TimeoutError`` is ``"sub_env_timeout"``;
    any other exception ``"sub_env_crash"`` (an env must judge any text without raising).
    """
    error = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, InfraError):
        cause = exc.cause
    elif isinstance(exc, TimeoutError):
        cause = InfraCause("sub_env_timeout", error)
    else:
        cause = InfraCause("sub_env_crash", error)
    return {
        "error": error,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
        INFRA_ERROR_KEY: cause.to_dict(),
    }


def find_infra_cause(info: Mapping[str, Any]) -> InfraCause | None:
    """The infrastructure failure a step's `info` reports, or `None` for a normal step.

    Looked for, in order: the marker ``info["infra_error"]``; a tool call's marker,
    ``info["tool_calls"][k]["info"]["infra_error"]`` (when ``tool_calls`` is a list of call
    records; a toolgym env's count of calls is no marker); the vector envs' failure report
    ``info["error"]`` (kind ``"sub_env_timeout"`` when it is a ``TimeoutError``, else
    ``"sub_env_crash"``). A malformed marker (not a dict with a ``kind``) counts as
    ``"unknown"`` with the marker's text as message: a failure is never dropped.
    """
    marker = info.get(INFRA_ERROR_KEY)
    if marker is not None:
        return _cause(marker)
    calls = info.get("tool_calls")
    # a list of call records (`ToolEnvWrapper`); toolgym envs count their calls there instead
    for call in calls if isinstance(calls, list) else ():
        call_info = call.get("info") if isinstance(call, Mapping) else None
        if isinstance(call_info, Mapping) and call_info.get(INFRA_ERROR_KEY) is not None:
            return _cause(call_info[INFRA_ERROR_KEY])
    error = info.get("error")
    if error is not None:
        text = str(error)
        kind = "sub_env_timeout" if text.startswith("TimeoutError") else "sub_env_crash"
        return InfraCause(kind, text)
    return None


def _cause(marker: Any) -> InfraCause:
    if isinstance(marker, Mapping) and isinstance(marker.get("kind"), str) and marker["kind"]:
        return InfraCause(marker["kind"], str(marker.get("message", "")))
    return InfraCause("unknown", str(marker))
