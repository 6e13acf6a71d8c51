"""TRL's own environment path end to end on CPU: ``GRPOTrainer(environment_factory=...)``
with xpgym's env class (`xpgym.adapters.trl.environment_class`), TRL's own generation,
tool-calling loop, tool-call parsing (the tokenizer's response template) and GRPO group
advantage, float32, for a few optimizer steps from the tool-calling warm tiny model
(`parity.shared.warm_model.WarmModelConfig` with ``tool_calls=True``). `parity.e2e.runs`
(``python -m parity.e2e --trainer trl-env``) calls `run_trl_env`.

TRL's transformers generation returns no log-probs, so the run measures the token layout
instead (`max_logprob_gap`): each generation's tokens are scored on the context they were
generated from (the prompt, or for a turn after a tool call, the ids TRL concatenated:
prompt, earlier turns, the tool reply's tokens) right after generating, and again in the
training row TRL built from the whole rollout, before the update, at the positions its loss
trains (``completion_mask * tool_mask``). A shifted, re-tokenised or wrongly masked row puts
0.1 and more between the two.

Beyond `parity.e2e.runs.check`'s fields the result has, per step: ``tool_calls`` (the tool
calls TRL parsed from the model's replies and ran), ``env_reward`` (the mean of the env
instances' `get_reward` of the step's rollouts), ``trl_env_reward`` (what TRL logged as
that reward, ``rewards/<class name>/mean``: equal when the env's reward reached TRL's) and
``frac_reward_zero_std`` (TRL's share of groups whose rewards are all alike: at 1 the
step rightly trains nothing, GRPO's advantages being all 0).

The episode log (`parity.e2e.runs`) holds the episodes the env stepped: a rollout whose
first reply calls no tool never reaches the env and is not in it.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from parity.e2e.config import E2EConfig
from parity.e2e.trl import grpo_config, step_clock, trained
from parity.shared.warm_model import warm_model_dir

__all__ = ["MAX_COMPLETION_LENGTH", "TOOL_WARM_START", "run_trl_env"]

TOOL_WARM_START = {"tool_calls": True, "pretrain_steps": 80, "pretrain_episodes": 4}
"""The warm model of this run: ``cfg.warm`` with these fields (`WarmModelConfig`): chats with
tools, pretrained on 80 x 4 transcripts (about 20 s on one thread; the first tool call it
samples is well-formed about 75% of the time, so rollouts both call and fail to call). Its
learning is bound by steps, not transcripts: 80 x 16 (about 80 s) ended at nearly the same
held-out loss (0.067 nats per token against 0.071) with 83% well-formed first calls, while
60 x 16 had 48%."""

MAX_COMPLETION_LENGTH = 320
"""Tokens after the first prompt, env tokens included: a tool call of the tiny tokenizer is
about 40 tokens, so the env's 4 turns, their replies and a last reply fit."""


def run_trl_env(cfg: E2EConfig, out_dir: Path, warm_dir: Path) -> dict[str, Any]:
    """TRL's own ``GRPOTrainer.train()`` with ``environment_factory`` for ``cfg.steps`` steps
    on ``cfg.warm.env``, from ``cfg.warm`` with `TOOL_WARM_START` (`warm_dir` is the
    plain warm model the other runs share, not read: this run's tokenizer chats with tools;
    its warm model is built once and cached like the plain one)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    from xpgym.adapters.trl import environment_class, task_dataset
    from xpgym.rollout.runner import make_tasks

    del warm_dir
    started = time.perf_counter()
    torch.manual_seed(cfg.seed)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    tool_dir = warm_model_dir(replace(cfg.warm, **TOOL_WARM_START))
    tokenizer = AutoTokenizer.from_pretrained(tool_dir)
    model = AutoModelForCausalLM.from_pretrained(tool_dir)
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    rows: list[dict[str, float]] = []
    environment = environment_class(cfg.warm.env)

    class MeasuredGRPOTrainer(GRPOTrainer):
        """TRL's trainer, timed and measured around its own generation (nothing replaced)."""

        def _generate_single_turn(self, prompt_ids: Any, *args: Any, **kwargs: Any) -> Any:
            completion_ids, logprobs = super()._generate_single_turn(prompt_ids, *args, **kwargs)
            for context, ids in zip(prompt_ids, completion_ids, strict=True):
                self._generated.append(
                    (list(context), list(ids), _scores(self.model, context, ids))
                )
            return completion_ids, logprobs

        def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
            self._generated: list[tuple[list[int], list[int], list[float]]] = []
            calls_before = len(self._metrics["train"]["tools/call_frequency"])
            begin = time.perf_counter()
            output = super()._generate_and_score_completions(inputs)
            seconds = time.perf_counter() - begin
            frequency = self._metrics["train"]["tools/call_frequency"][calls_before:]
            mask = output["completion_mask"] * output["tool_mask"]
            rewards = [env.get_reward() for env in self.environments]
            rows.append(
                {
                    "rollout_s": seconds,
                    "policy_tokens": float(mask.sum()),
                    "tool_calls": float(sum(frequency)) * len(inputs),
                    "env_reward": float(sum(rewards) / len(rewards)),
                    "logprob_gap": _layout_gap(self.model, output, mask, self._generated),
                }
            )
            return output

    clock, steps = step_clock()
    config = grpo_config(cfg, out_dir / "trl_env_run", MAX_COMPLETION_LENGTH)
    trainer = MeasuredGRPOTrainer(
        model=model,
        processing_class=tokenizer,
        args=config,
        train_dataset=task_dataset(
            make_tasks(cfg.warm.env, cfg.steps * cfg.tasks_per_step, seed=cfg.seed), chat=True
        ),
        environment_factory=environment,
        callbacks=[clock],
    )
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    reward_key = f"rewards/{environment.__name__}/mean"
    return {
        "trainer": "trl-env",
        **trained(trainer, model, start, steps, rows, started),
        "tool_calls": [r["tool_calls"] for r in rows],
        "env_reward": [r["env_reward"] for r in rows],
        "trl_env_reward": [float(entry.get(reward_key, math.nan)) for entry in logs],
        "frac_reward_zero_std": [float(entry["frac_reward_zero_std"]) for entry in logs],
        "warm_model": str(tool_dir),
    }


def _scores(model: Any, context: list[int], ids: list[int]) -> list[float]:
    """The log-probs `model` gives `ids` after `context` (eval mode, no gradient)."""
    import torch

    if not ids:
        return []
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            sequence = torch.tensor([[*context, *ids]], device=model.device)
            logits = model(input_ids=sequence).logits[0, len(context) - 1 : -1].float()
            scored = torch.log_softmax(logits, -1).gather(-1, sequence[0, len(context) :, None])
    finally:
        model.train(was_training)
    return scored[:, 0].cpu().tolist()


def _layout_gap(
    model: Any,
    output: dict[str, Any],
    mask: Any,
    generated: list[tuple[list[int], list[int], list[float]]],
) -> float:
    """Largest |generation-time - training-row| log-prob over the trained tokens of a batch
    (module docstring); inf when a trained run of tokens is no generation's (its context and
    tokens match none)."""
    gap = 0.0
    for b in range(mask.shape[0]):
        prompt = output["prompt_ids"][b][output["prompt_mask"][b].bool()].tolist()
        length = int(output["completion_mask"][b].sum())
        completion = output["completion_ids"][b][:length].tolist()
        trained = mask[b][:length].tolist()
        row_scores = _scores(model, prompt, completion)
        s = 0
        while s < length:
            if not trained[s]:
                s += 1
                continue
            e = s
            while e < length and trained[e]:
                e += 1
            context, segment = prompt + completion[:s], completion[s:e]
            match = next(
                (
                    scores
                    for ctx, ids, scores in generated
                    if ctx == context and ids[: len(segment)] == segment
                ),
                None,
            )
            if match is None:
                return math.inf
            gap = max(gap, *(abs(x - y) for x, y in zip(match, row_scores[s:e], strict=False)))
            s = e
    return gap
