r"""Warm start: train a fresh tiny model as a plain language model on transcripts of random play.

A randomly initialised model never writes a valid ``\boxed{n}``, so every episode earns the
same return and RL has no signal at all. `pretrain` first trains it as a language model on
*whole transcripts* (the env's text and the actions) of episodes played by a random policy
such as `RandomValidGuesser`, which ignores the feedback. The model learns the answer format
and to read the transcript (to predict "than 7" it must attend to the guess it just made),
but sees no strategy: after this phase it is still a random guesser, and RL has to find the
strategy. Imitating the actions alone is not enough: the model then learns an answer that
ignores the context, and RL could not move it (``docs/demo.md``).

The CPU demo (``recipes/train_torch.py``) and the parity curves (`parity.curves`) start
from these weights, with the tokenizer of `xpgym.reference.tiny_model` built over
`env_corpus` episodes seeded from `CORPUS_SEED`. Importing this module imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

import xpgym
from xpgym.core.env import Env
from xpgym.reference.losses import token_logprobs
from xpgym.rollout.collector import RolloutCollector
from xpgym.rollout.policies import Generation
from xpgym.training.layouts import episode_rows

if TYPE_CHECKING:
    from xpgym.core.vector.base import VectorEnv

__all__ = [
    "CORPUS_SEED",
    "PRETRAIN_SEED",
    "RandomValidGuesser",
    "lm_step",
    "number_range",
    "pretrain",
]

CORPUS_SEED = 10_000_000
"""Reset seeds ``CORPUS_SEED, CORPUS_SEED + 1, ...`` play the episodes whose text builds the
tokenizer's vocabulary (`xpgym.reference.tiny_model.env_corpus`)."""

PRETRAIN_SEED = 500_000_000
"""Pretraining step ``k`` plays episodes with reset seeds derived from ``PRETRAIN_SEED + k``
(far from the seeds RL and evaluation use)."""


class RandomValidGuesser:
    r"""A `Policy` that answers a uniform random ``\boxed{n}``, tokenized like the model's own.

    Args:
        tokenizer: The model's tokenizer; each answer's ``token_ids`` are its encoding of
            the text followed by ``tokenizer.eos_token_id``.
        low, high: The guesses are integers in ``[low, high]`` (`number_range`).
        seed: Seeds the guesses (a ``numpy`` generator owned by this policy).
    """

    def __init__(self, tokenizer: Any, low: int, high: int, seed: int) -> None:
        self.tokenizer = tokenizer
        self.low, self.high = low, high
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts: list[Any]) -> list[Generation]:
        """One random guess per prompt; the prompts themselves are not read."""
        out = []
        for _ in prompts:
            text = f"\\boxed{{{int(self.rng.integers(self.low, self.high + 1))}}}"
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            out.append(Generation(text=text, token_ids=[*ids, self.tokenizer.eos_token_id]))
        return out


def number_range(env_id: str) -> tuple[int, int]:
    """The smallest and largest secret number of a GuessTheNumber env (from its reset info)."""
    env = xpgym.make(env_id)
    if not isinstance(env, Env):
        raise TypeError(f"{env_id!r} is a multi-agent env; the warm start plays GuessTheNumber")
    _, info = env.reset(seed=0)
    env.close()
    return int(info["min_number"]), int(info["max_number"])


def lm_step(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
) -> float:
    """One optimizer step of `pretrain` on a batch of whole rows: the mean next-token NLL over
    every token but each row's first, gradient norm clipped to 1.

    Args:
        input_ids, attention_mask: ``[B, T]``, right padding (``attention_mask`` 0 on pads).

    Returns:
        The loss (mean NLL per predicted token) before the step.
    """
    mask = attention_mask.float()
    mask[:, 0] = 0.0  # right padding: column 0 is each row's first token, unpredicted
    logp = token_logprobs(model, input_ids, attention_mask)
    loss = -(logp * mask).sum() / mask.sum()  # NLL per predicted token
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return float(loss.detach())


def pretrain(
    model: torch.nn.Module,
    tokenizer: Any,
    vec_env: VectorEnv,
    policy: Any,
    *,
    steps: int,
    episodes_per_step: int,
    lr: float,
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Language-model pretraining of `model` on transcripts of `policy` playing `vec_env`.

    Step ``k`` plays `episodes_per_step` fresh episodes (seeded from ``PRETRAIN_SEED + k``)
    and takes one AdamW step (`lm_step`: learning rate `lr`, AdamW's default weight decay,
    gradient norm clipped to 1) on the mean next-token NLL over **every** token of the episode rows
    (prompts, env text, template tokens and actions; padding excluded). Transcripts end at
    the last action: the final observation, which may reveal the target, is never in a row.

    Args:
        model: A transformers causal LM, updated in place.
        tokenizer: Its tokenizer (gives the pad id).
        vec_env: The envs the episodes are played in.
        policy: The random policy whose play is imitated, e.g. `RandomValidGuesser`.
        steps: Optimizer steps.
        episodes_per_step: Fresh episodes per step.
        lr: AdamW's learning rate.
        on_step: Called with ``(step, loss)`` after each step (e.g. to advance a progress
            bar); None: nothing.

    Returns:
        The loss (mean NLL per predicted token) of each step.
    """
    collector = RolloutCollector(vec_env, policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    device = next(model.parameters()).device
    losses = []
    for step in range(steps):
        episodes = collector.collect(episodes_per_step, seed=PRETRAIN_SEED + step)
        rows = episode_rows(episodes).pad(pad_token_id=tokenizer.pad_token_id)
        input_ids = torch.as_tensor(rows.input_ids, device=device)
        attention_mask = torch.as_tensor(rows.attention_mask, device=device)
        losses.append(lm_step(model, optimizer, input_ids, attention_mask))
        if on_step is not None:
            on_step(step, losses[-1])
    return losses
