"""Score one answer with a reasoning-gym task; runs only inside the scoring sandbox.

Imported once by the sandbox's zygote (a preload), so every call starts with
``reasoning_gym`` imported. ``cellpylib`` is replaced by an empty module first: it imports
matplotlib, which needs a writable configuration directory, and the zygote's file system is
read-only; only question generation (``game_of_life``, ``game_of_life_halting``) uses
cellpylib, never ``score_answer``.

Protocol (`main`): stdin holds a pickle of ``{"task", "config", "entry", "answer",
"nonce"}`` written by the host; the last stdout line is ``"<nonce> <score>"``. The answer
is model text that some tasks' ``score_answer`` evaluates as Python; the nonce only stops
an answer from printing a plausible score line without knowing it.
"""

from __future__ import annotations

import pickle
import sys
import types

if __name__ != "xpgym_rg_scorer":  # e.g. imported as xpgym.envs.reasoning_gym.sandbox...
    raise ImportError("xpgym_rg_scorer runs only inside the reasoning-gym scoring sandbox")

sys.modules.setdefault("cellpylib", types.ModuleType("cellpylib"))

import reasoning_gym  # noqa: E402  (after the cellpylib stand-in)


def main() -> None:
    """Read the request from stdin, score the answer, print ``"<nonce> <score>"``."""
    request = pickle.loads(sys.stdin.buffer.read())
    dataset = reasoning_gym.create_dataset(request["task"], **request["config"])
    score = dataset.score_answer(answer=request["answer"], entry=request["entry"])
    sys.stdout.write(f"\n{request['nonce']} {float(score)!r}\n")
    sys.stdout.flush()
