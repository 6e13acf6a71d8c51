r"""ReasoningGymEnv: one procedurally generated reasoning-gym question, scored by its task.

Episode rules:

* At construction the env builds the task's dataset, ``reasoning_gym.create_dataset(task,
  seed=dataset_seed, size=size, **config)``: `size` fixed questions (GEM's defaults: 500
  questions, seed 42). `reset()` draws one of them uniformly with `np_random` (with
  replacement), or takes ``options={"index": i}``. The observation is the task's question
  followed by the answer-format instruction.
* The episode is **single-turn**: the first `step()` scores the action and terminates
  (``terminated=True, truncated=False``).
* Answer format: the content of the last complete ``<answer>...</answer>`` block
  (`xpgym.envs.common.answers.last_tagged`); without one, the content of the last closed
  ``\boxed{...}`` (`xpgym.envs.common.answers.last_boxed`, the math envs' rule). An
  ``<answer>`` whose whole content is one ``\boxed{X}`` with no box inside counts as ``X``
  (``<answer>\boxed{5}</answer>`` is ``5``; nested or several boxes stay as written).

Why a fixed-size dataset and a random index, not a fresh dataset per reset: some tasks
precompute their questions (``acre``) or load data (``arc_agi``, ``group_anagrams``) when
the dataset is built, which costs up to a second; drawing an index costs nothing. Raise
`size` (or change `dataset_seed`) for more distinct questions.

Rewards: the task's own ``score_answer`` (run in a sandbox, `xpgym.envs.reasoning_gym.scoring`),
a float in ``[0, 1]``; some tasks give partial credit (e.g. a right answer with extra text).

=================================  =========================  ===========================
Action                             reward                     ``info``
=================================  =========================  ===========================
an answer the task scores 1.0      ``1.0``                    ``correct=True``
any other answer                   the task's score (<1.0)    ``correct=False``
no answer block                    ``0.0`` (not scored)       ``invalid_action=True``
scoring failed (timeout, crash)    ``0.0``                    ``score_error`` set
=================================  =========================  ===========================

``info`` after the step: ``correct`` (``score == 1.0``), ``invalid_action``,
``parsed_action`` (the extracted answer or `None`), ``score``, ``score_error`` (`None` or
the reason), ``reference_answer`` (the dataset's answer; `None` for tasks that only verify,
e.g. ``rush_hour``) and ``metrics`` (``{"score"}``). After `reset`: ``task``, ``index``.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from xpgym.core.env import Env
from xpgym.core.optional import import_optional
from xpgym.envs.common.answers import last_boxed, last_tagged
from xpgym.envs.common.datasets import pick_index
from xpgym.envs.reasoning_gym.scoring import score_answer

__all__ = ["INVALID_REWARD", "ReasoningGymEnv", "extract_answer"]

INVALID_REWARD = 0.0
_ONE_BOX = re.compile(r"\\boxed\s*\{(.*)\}", re.DOTALL)

_INSTRUCTIONS = (
    "Give your final answer inside <answer> and </answer> (\\boxed{...} is accepted too); "
    "only the last one counts."
)


def extract_answer(action: str) -> str | None:
    r"""The answer in `action`: the last ``<answer>`` block, else the last ``\boxed{}``."""
    answer = last_tagged(action, "answer")
    if answer is None:
        return last_boxed(action)
    whole = _ONE_BOX.fullmatch(answer)
    if whole is not None and whole.group(1).strip() == last_boxed(answer):
        return whole.group(1).strip()
    return answer


class ReasoningGymEnv(Env[str]):
    """One reasoning-gym task as a single-turn env; see the module docstring.

    Args:
        task: A reasoning-gym dataset name (``reasoning_gym.factory.DATASETS``).
        size: Questions in the dataset the env draws from.
        dataset_seed: The dataset's seed (which `size` questions there are).
        config: More options of the task's config dataclass (e.g. difficulty ranges).
        score_timeout_s: Limit of one scoring call (wall clock and CPU).
        sandbox_backend: ``"bwrap"``, or ``"UNSAFE_NO_SANDBOX"`` to score in a plain
            subprocess on machines without bubblewrap (answers may run as code on the host
            there, and each score imports reasoning-gym again: seconds, not milliseconds).

    Attributes:
        dataset: The reasoning-gym dataset. entry: The current item (after `reset`).
        index: The current item's index (`None` before `reset`).

    Raises:
        ImportError: reasoning-gym is not installed.
        ValueError: unknown task (close names suggested), ``seed``/``size`` in `config`,
            or a config the task rejects.
    """

    metadata: ClassVar[dict[str, Any]] = {"multi_turn": False}

    def __init__(
        self,
        task: str,
        *,
        size: int = 500,
        dataset_seed: int = 42,
        config: Mapping[str, Any] | None = None,
        score_timeout_s: float = 10.0,
        sandbox_backend: str = "bwrap",
    ) -> None:
        rg = import_optional(
            "reasoning_gym", needed_by="ReasoningGymEnv", install='pip install "xpgym[envs]"'
        )
        names = sorted(rg.factory.DATASETS)
        if task not in names:
            close = difflib.get_close_matches(task, names, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(f"ReasoningGymEnv: unknown task {task!r}{hint}")
        options = dict(config or {})
        if {"seed", "size"} & set(options):
            raise ValueError("ReasoningGymEnv: pass size= and dataset_seed=, not in config")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"ReasoningGymEnv: size must be a positive int, got {size!r}")
        self.task = task
        self.dataset_config = {"seed": dataset_seed, "size": size, **options}
        self.score_timeout_s = float(score_timeout_s)
        self.sandbox_backend = sandbox_backend
        self.dataset = rg.create_dataset(task, **self.dataset_config)
        self.index: int | None = None
        self.entry: dict[str, Any] = {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Draw a question (``options["index"]`` if given, else uniformly with `np_random`).

        Raises:
            ValueError: ``options["index"]`` is not in ``[0, size)``.
        """
        super().reset(seed=seed)
        index = pick_index(options, len(self.dataset), self.np_random, "ReasoningGymEnv")
        self._load(index)
        return f"{self.entry['question']}\n\n{_INSTRUCTIONS}", {"task": self.task, "index": index}

    def _load(self, index: int) -> None:
        self.index = index
        self.entry = self.dataset[index]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Score the answer and end the episode; see the module docstring."""
        answer = extract_answer(action)
        reference = self.entry["answer"]
        error = None
        if answer is None:
            score = INVALID_REWARD
            feedback = "No answer found: put your final answer inside <answer> and </answer>."
        else:
            result = score_answer(
                self.task,
                self.dataset_config,
                self.entry,
                answer,
                timeout_s=self.score_timeout_s,
                backend=self.sandbox_backend,
            )
            score, error = result.score, result.error
            if error is not None:
                feedback = f"Your answer could not be scored ({error}); score 0."
            else:
                feedback = "Correct." if score == 1.0 else f"Score {score:.3g} of 1."
        if isinstance(reference, str):
            feedback += f" Reference answer: {reference}"
        info = {
            "correct": score == 1.0,
            "invalid_action": answer is None,
            "parsed_action": answer,
            "score": score,
            "score_error": error,
            "reference_answer": reference,
            "metrics": {"score": score},
        }
        return feedback, score, True, False, info

    def sample_random_action(self) -> str:
        """``<answer>k</answer>`` with `k` an integer in 0..99 drawn from `np_random`."""
        return f"<answer>{int(self.np_random.integers(100))}</answer>"

    def get_state(self) -> dict[str, Any]:
        """Snapshot: the question's index and the RNG state (a fresh dict)."""
        return {"index": self.index, "rng": self.np_random.bit_generator.state}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a `get_state()` snapshot taken from an env with the same arguments (the
        question is generated again from its index; generation is deterministic)."""
        self._load(state["index"])
        self.np_random.bit_generator.state = state["rng"]
