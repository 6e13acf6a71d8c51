"""Read what the viewer shows: episode JSONL, an eval output directory, parity golden files.

Every input becomes a list of *view episodes*: plain JSON-ready dicts, one per episode, in the
shape the page's script reads (`ViewEpisode` documents the keys). Three inputs are accepted:

* a JSON Lines file of `xpgym.core.trajectory.Episode` dicts (``save_episodes`` output, the
  collector's and the demo's episodes, the parity golden files under ``parity/tokens/golden/``);
* an ``episodes.jsonl`` of `xpgym.eval.records` (one record per planned episode, the last
  record of each key wins, as in the eval summary), ordered by env id, seed and sample;
* an eval output directory (its ``episodes.jsonl``).

A file's kind is told by its first record: eval records have ``status`` and ``results``.
Episodes are read leniently (unknown keys are kept in ``info``), so a viewer of today opens
files written by a later xpgym.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from xpgym.core.trajectory import Episode
from xpgym.eval.metrics import is_success
from xpgym.eval.records import load_records

__all__ = ["ViewEpisode", "episode_view", "eval_record_view", "load_view_episodes"]

ViewEpisode = dict[str, Any]
"""One episode as the page reads it (all values JSON)::

    {"env": str, "seed": int | None, "sample": int | None, "group": str | None,
     "model": str | None,
     "status": "success" | "failure" | "error",
     "return": float | None,            # None: failed record, or multi-agent (see returns)
     "returns": {agent: float} | None,  # multi-agent records
     "turns": int, "error": str | None, "truncated_reason": str | None,
     "info": {...},                     # episode-level info and record fields, images removed
     "final_images": [data URL],        # images of the observation after the last turn
     "steps": [{"agent": str | None, "observation": text or chat messages, "action": str,
                "reward": float, "terminated": bool, "truncated": bool,
                "truncated_reason": str | None, "tool_calls": [...] | None,
                "images": [data URL],   # images of the observation this turn acted on
                "info": {...}}],
     "episode": Episode | None}         # for the token view only; dropped before embedding

``status`` is ``"error"`` when the episode did not run to an end of its own: a failed eval
record, a turn whose info carries ``"error"`` (a sub-env that raised or timed out) or an
``outcome`` other than ``"ok"``; otherwise ``"success"`` or ``"failure"`` by
`xpgym.eval.metrics.is_success` (multi-agent: some agent succeeded).
"""

_IMAGE_URL = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}")
_EVAL_RECORD_KEYS = frozenset({"status", "results"})


def load_view_episodes(path: str | Path) -> list[ViewEpisode]:
    """The view episodes of `path`: an episodes JSONL file, an eval ``episodes.jsonl`` or an
    eval output directory (see the module docstring).

    Raises:
        FileNotFoundError: `path` does not exist, or a directory has no ``episodes.jsonl``.
        ValueError: A line is not JSON or not an episode or eval record (the message names
            the file and line).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "episodes.jsonl"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist; give an episodes JSONL file, an eval output directory "
            "or a parity golden file"
        )
    lines = _json_lines(path)
    first = next(lines, None)
    if first is None:
        return []
    if set(first[1]) >= _EVAL_RECORD_KEYS:
        records = load_records(path)  # in the order episodes ended; shown in plan order
        return [eval_record_view(records[key]) for key in sorted(records)]
    views = []
    for number, data in [first, *lines]:
        try:
            views.append(episode_view(data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{path}:{number}: not an episode ({exc})") from exc
    return views


def episode_view(data: Mapping[str, Any]) -> ViewEpisode:
    """The view of one ``Episode.to_dict()`` (or a dict of the same shape).

    Raises:
        KeyError, TypeError: `data` has no ``env_id`` or its turns are not dicts.
    """
    info = dict(data.get("info") or {})
    reset_info = dict(info.pop("reset_info", None) or {})
    reset_images = _take_images(reset_info)
    if reset_info:
        info["reset_info"] = reset_info
    steps = [_turn_step(turn) for turn in data.get("turns") or []]
    # The images a step returns belong to the observation of the turn after it.
    observation_images = [reset_images, *(step.pop("images") for step in steps)]
    for step, images in zip(steps, observation_images, strict=False):
        step["images"] = images
    episode_return = float(sum(step["reward"] for step in steps))
    last_info = steps[-1]["info"] if steps else {}
    errors = [step["info"]["error"] for step in steps if "error" in step["info"]]
    outcome = data.get("outcome", "ok")
    if outcome != "ok":
        errors.insert(0, f"outcome {outcome}")
    extra = {k: v for k, v in data.items() if k not in ("env_id", "seed", "group_id", "turns")}
    extra.pop("info", None)
    return {
        "env": str(data["env_id"]),
        "seed": data.get("seed"),
        "sample": None,
        "group": data.get("group_id"),
        "model": None,
        "status": "error"
        if errors
        else ("success" if is_success(last_info, episode_return) else "failure"),
        "return": episode_return,
        "returns": None,
        "turns": len(steps),
        "error": "; ".join(map(str, errors)) or None,
        "truncated_reason": info.get("truncated_reason") or last_info.get("truncated_reason"),
        "info": {**info, **extra},
        "final_images": observation_images[len(steps)],
        "steps": steps,
        "episode": _episode_or_none(data),
    }


def eval_record_view(record: Mapping[str, Any]) -> ViewEpisode:
    """The view of one `xpgym.eval.records` record (single- or multi-agent, ok or failed)."""
    results = record.get("results") or []
    meta = {k: v for k, v in record.items() if k not in ("episode", "transcript")}
    if record.get("episode") is not None:
        view = episode_view(record["episode"])
        view["info"] = {**view["info"], "reset_seed": view["seed"], "record": meta}
    else:
        steps = [
            step
            for joint in (record.get("transcript") or {}).get("steps", [])
            for step in _joint_steps(joint)
        ]
        view = {
            "env": record["env_id"],
            "group": None,
            "return": None,
            "turns": len(steps),
            "truncated_reason": (record.get("transcript") or {}).get("truncated_reason"),
            "info": {"record": meta},
            "final_images": [],
            "steps": steps,
            "episode": None,
        }
    returns = {str(r.get("agent")): r.get("return") for r in results}
    view.update(
        seed=record.get("seed"),  # the planned seed (--seed ...), not the derived reset seed
        sample=record.get("sample"),
        model=", ".join(sorted({str(r.get("model")) for r in results})) or None,
        returns=returns if len(results) > 1 or (results and results[0].get("agent")) else None,
    )
    if view["returns"] is not None:
        view["return"] = None
    if record.get("status") == "failed":
        view.update(status="error", error=record.get("error") or "failed")
    elif view.get("status") != "error":
        ok = any(r.get("success") for r in results)
        view.update(status="success" if ok else "failure", error=None)
    return view


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc})") from None
            if not isinstance(data, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object, got {data!r:.60}")
            yield number, data


def _turn_step(turn: Mapping[str, Any], agent: str | None = None) -> dict[str, Any]:
    """The view step of one ``Turn.to_dict()``-shaped mapping, acted by `agent`."""
    info = dict(turn.get("info") or {})
    images = _take_images(info)
    return {
        "agent": agent,
        "observation": turn.get("observation"),
        "action": turn.get("action"),
        "reward": float(turn.get("reward") or 0.0),
        "terminated": bool(turn.get("terminated")),
        "truncated": bool(turn.get("truncated")),
        "truncated_reason": info.get("truncated_reason"),
        "tool_calls": info.pop("tool_calls", None),
        "images": images,
        "info": info,
    }


def _joint_steps(joint: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """One view step per agent that acted in a multi-agent transcript step; the nonzero
    rewards of agents that did not act go in its ``info["rewards_of_other_agents"]``."""
    fields = {
        "observation": "observations",
        "reward": "rewards",
        "terminated": "terminations",
        "truncated": "truncations",
        "info": "infos",
    }
    rewards = joint.get("rewards") or {}
    for agent, action in (joint.get("actions") or {}).items():
        turn = {name: (joint.get(key) or {}).get(agent) for name, key in fields.items()}
        step = _turn_step({**turn, "action": action}, agent)
        others = {other: r for other, r in rewards.items() if other != agent and r}
        if others:  # e.g. the loser of a board game, rewarded on the winner's move
            step["info"]["rewards_of_other_agents"] = others
        yield step


def _take_images(info: dict[str, Any]) -> list[str]:
    """Remove ``info["images"]`` and return the entries that are raster image data URLs
    (anything else, e.g. an ``http://`` URL the page must never fetch, is left out)."""
    images = info.pop("images", None) or []
    if not isinstance(images, list):
        return []
    return [url for url in images if isinstance(url, str) and _IMAGE_URL.fullmatch(url)]


def _episode_or_none(data: Mapping[str, Any]) -> Episode | None:
    """The `Episode` when some turn carries token ids (for the token view), else `None`."""
    turns = data.get("turns") or []
    if not any(isinstance(t, Mapping) and t.get("response_ids") for t in turns):
        return None
    try:
        return Episode.from_dict(data)
    except (TypeError, ValueError):
        return None
