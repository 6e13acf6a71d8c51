r"""RL2 adapter: `Episode`\s -> RL2's tensor dict, an env module, and per-turn ReBN.

Supported: the PyPI release ``rl-square`` 0.0.2 (``RL2`` package). Current RL2 ``main``
differs (see the end of this docstring). Three parts:

1. **Converter** `to_tensor_dict`: episodes -> ``(tensor_dict, cu_seqs)`` as RL2's
   ``Rollout.__call__`` returns them, built with RL2's own ``get_tensor_dict`` /
   ``pack_tensor_dicts`` conventions.
2. **Hook** the env module for ``rollout.env_path`` (`ENV_PATH`, functions `reset` and
   `step`, RL2 0.0.2's text API): RL2's rollout calls ``reset(extra_info)`` once and
   ``step(state_text, action_text, extra_info)`` per turn; xpgym plays the env named by the
   dataset row's ``extra_info`` (`make_extra_info`) and renders each next state with the
   tokenizer's chat template so that it extends ``state_text + action_text``: RL2 then keeps
   the episode in one sequence and masks the env tokens. Between calls the episode is held
   by the task RL2 runs the sample in (`xpgym.rollout.runner.LiveEpisodes`): when RL2 drops
   a sample (its own ``rollout.max_turns`` came before the episode's end, it raised
   between two calls), the episode's env goes back to the pool when that task ends; an env
   whose ``reset`` or ``step`` raised (or was cancelled) is closed at once. No env is left
   behind.
3. **Override** `install_turn_advantages`: RL2's ``reinforce`` sums each trajectory's
   rewards (gamma ignored) and normalises episode scores, so per-turn returns and ReBN are
   not expressible. ``adv.estimator=xpgym_rebn`` (or ``xpgym_reinforce``) with this override
   installed computes per-turn ``G_t`` (``adv.gamma``) over each trajectory's turns, across
   its sequences (``cu_seqs``), then ReBN over all turns, exactly as `xpgym.training.advantages`.
   It patches ``RL2.trainer.ppo.compute_advantages`` (the name RL2's trainer calls); other
   estimators go to RL2's own function.
4. **Launch configuration** `ppo_overrides` / `ppo_config` / `write_dataset` / `train`: RL2's
   ``ppo`` config for a run on xpgym's env module, the task rows its dataloader reads, and
   RL2's trainer run with the override and the infra-error masking installed
   (``recipes/train_rl2.py`` runs `train` under torchrun).

Tensor dict (``N`` sequences, right-padded with 0 to the longest, ``L - 1`` positions)
----------------------------------------------------------------------------------

================  =======  ===========  ==================================================
key               dtype    shape        meaning
================  =======  ===========  ==================================================
``states``        int64    [N, L-1]     tokens ``0 .. n-2`` of the sequence (the inputs)
``actions``       int64    [N, L-1]     token ``j + 1`` where it is a policy token, else 0
``action_mask``   int64    [N, L-1]     1 where token ``j + 1`` is a policy token (env/tool
                                        tokens, prompt, padding: 0)
``eos_mask``      int64    [N, L-1]     1 at the last position of each sequence
``position_ids``  int64    [N, L-1]     ``0 .. n-2``, 0 at padding
``llm_logps``     float32  [N, L-1]     sampler log-prob of token ``j + 1`` (0 elsewhere)
``rewards``       float32  [N, L-1]     each turn's reward at its last policy token (shifted
                                        like ``actions``)
``cu_seqs``       int64    [E+1]        sequence offsets of each episode (trajectory)
================  =======  ===========  ==================================================

An episode is one sequence when its prompts extend each other (token-exact turns), else
it is split where they stop doing so (RL2's rule; `episode_rows(on_mismatch="split")`).

Infra-error episodes (``Episode.outcome == "infra_error"``, `xpgym.core.errors`): in
`to_tensor_dict` their sequences have ``action_mask`` 0 and ``rewards`` 0 (no loss, no turn
in the per-turn override `turn_advantages`). RL2's own ``reinforce`` groups fixed blocks of
``responses_per_prompt`` over action tokens only and would count a failed member with score
0; the override routes a batch with one to `reinforce_without_failed`, which leaves it out
of its block's statistics. The env module (`reset`/`step`) ends such an episode at the
failed step (``done``; a step that raises is one, `xpgym.rollout.runner.isolated_step`) and
marks the sample's ``extra_info`` (`INFRA_ERROR_KEY`); RL2's env API has no per-sample loss
mask, so `install_infra_masking` wraps RL2's ``Rollout.rollout`` to zero that sample's
``action_mask`` and ``rewards`` (`mask_infra_sample`).

Differences from the reference trainer that change curves (advantages, loss aggregation,
KL, clipping, budgets) are listed in one place: docs/trainers.md, section "RL2".


Current RL2 ``main`` (not supported here)
----------------------------------------
The env module instead defines ``async generate(config, tokenizer, router_url, sample)``
and runs the turn loop itself (``add_llm_response``/``add_env_response`` on a ``Sample``),
with token ids from SGLang; config keys moved (``rollout.train.*``,
``rollout.env_path``); advantages still come from ``compute_advantages`` in
``RL2/utils/algorithms.py`` and keep the same tensor-dict keys. A ``generate`` over
`xpgym.rollout.runner.run_episode` would be the port.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from xpgym.core.optional import import_optional

_INSTALL = 'pip install "xpgym[rl2]"'
import_optional("RL2", needed_by="xpgym.adapters.rl2", install=_INSTALL)

import torch  # noqa: E402

from xpgym.core.trajectory import Episode, episode_metrics  # noqa: E402
from xpgym.rollout.policies import Generation  # noqa: E402
from xpgym.rollout.runner import (  # noqa: E402
    EpisodeTask,
    LiveEpisodes,
    shared_prompt_builder,
    task_env_pool,
)
from xpgym.training.advantages import (  # noqa: E402
    TOKEN_ESTIMATORS,
    CriticFreeAlgorithm,
    TokenEstimator,
    dr_grpo,
    grpo,
    token_advantages,
)
from xpgym.training.layouts import (  # noqa: E402
    episode_rows,
    shift_to_predictions,
    zero_padded_positions,
)

__all__ = [
    "ALGORITHMS",
    "ENV_PATH",
    "ESTIMATORS",
    "INFRA_ERROR_KEY",
    "METRICS_KEY",
    "install_infra_masking",
    "install_turn_advantages",
    "make_extra_info",
    "mask_infra_sample",
    "ppo_config",
    "ppo_overrides",
    "reinforce_without_failed",
    "reset",
    "step",
    "to_tensor_dict",
    "train",
    "write_dataset",
]

logger = logging.getLogger(__name__)

ENV_PATH = str(Path(__file__).with_name("rl2_env.py"))
"""A file for ``rollout.env_path`` that exposes `reset` and `step`."""

ESTIMATORS: dict[str, TokenEstimator] = {f"xpgym_{name}": name for name in TOKEN_ESTIMATORS}
"""``adv.estimator`` values the override handles -> `token_advantages` estimator."""


# --------------------------------------------------------------------------------------
# Converter
# --------------------------------------------------------------------------------------


def to_tensor_dict(episodes: Sequence[Episode]) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """RL2's packed tensor dict and ``cu_seqs`` for `episodes` (module docstring).

    Returns:
        ``(tensor_dict, cu_seqs)``: ``[N, L - 1]`` tensors (``N`` sequences) and ``[E + 1]``
        int64 offsets of each episode's sequences.
    """
    rows = episode_rows(episodes, on_mismatch="split").pad(pad_token_id=0)
    lengths = rows.attention_mask.sum(axis=1)
    width = rows.input_ids.shape[1] - 1
    real = np.arange(width) < (lengths - 1)[:, None]  # positions 0 .. n-2
    action_mask = shift_to_predictions(rows.response_mask)
    eos_mask = np.zeros((len(rows), width), dtype=np.int64)
    eos_mask[np.arange(len(rows)), lengths - 2] = 1
    logprobs = rows.rollout_logprobs
    if logprobs is None:
        logprobs = np.zeros(rows.input_ids.shape, dtype=np.float32)
    arrays = {
        "states": np.where(real, rows.input_ids[:, :-1], 0),
        "actions": np.where(action_mask == 1, shift_to_predictions(rows.input_ids), 0),
        "action_mask": action_mask,
        "eos_mask": eos_mask,
        "position_ids": zero_padded_positions(real),
        "llm_logps": shift_to_predictions(logprobs),
        "rewards": shift_to_predictions(rows.token_rewards),
    }
    tensor_dict = {
        key: torch.from_numpy(np.ascontiguousarray(value)) for key, value in arrays.items()
    }
    per_episode = np.bincount(rows.episode_index, minlength=len(episodes))
    cu_seqs = torch.from_numpy(np.concatenate([[0], np.cumsum(per_episode)]).astype(np.int64))
    return tensor_dict, cu_seqs


# --------------------------------------------------------------------------------------
# Per-turn advantage override
# --------------------------------------------------------------------------------------


def turn_advantages(
    config: Any, tensor_dict: dict[str, torch.Tensor], cu_seqs: torch.Tensor
) -> None:
    """Set ``tensor_dict["advantages"]`` to per-turn REINFORCE/ReBN advantages, in place.

    ``config`` is RL2's ``adv`` config (``estimator`` one of `ESTIMATORS`, ``gamma``).
    Rewards sit on each turn's last action position; a trajectory's turns are the runs of
    ``action_mask`` over its sequences in order (``cu_seqs``).
    """
    estimator = ESTIMATORS[config.estimator]
    advantages = token_advantages(
        tensor_dict["rewards"].detach().cpu().numpy(),
        tensor_dict["action_mask"].detach().cpu().numpy(),
        estimator=estimator,
        gamma=float(config.gamma),
        episode_offsets=cu_seqs.detach().cpu().numpy(),
    )
    tensor_dict["advantages"] = torch.as_tensor(advantages, dtype=torch.float32)


def reinforce_without_failed(
    config: Any, tensor_dict: dict[str, torch.Tensor], cu_seqs: torch.Tensor
) -> None:
    """RL2's own ``reinforce``, with failed trajectories out of its statistics, in place.

    A failed trajectory is one with no action token: what `mask_infra_sample` makes of an
    infra-error sample (a healthy one has at least one policy token). RL2 0.0.2's
    ``compute_reinforce_adv`` sums each trajectory's rewards over its action tokens, so it
    counts such a trajectory with score 0 in its block of ``responses_per_prompt`` (the whole
    batch with ``global_norm``) and moves the others' baseline. Here the block mean (and,
    with ``norm_var``, the unbiased std plus float32 eps, as RL2) is that of the block's
    healthy members only, so each of them gets exactly its advantage without the failed
    ones (`xpgym.training.advantages.dr_grpo` / `grpo`; a block with one healthy member
    gives it 0). ``tensor_dict["advantages"]`` is the trajectory's advantage on each of its
    action tokens, 0 elsewhere, as RL2.

    Raises:
        ValueError: The trajectory count is not a multiple of ``responses_per_prompt``.
    """
    mask = tensor_dict["action_mask"].detach().cpu().numpy() != 0
    rewards = tensor_dict["rewards"].detach().cpu().numpy()
    offsets = cu_seqs.detach().cpu().numpy()
    trajectory = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    scores = np.bincount(trajectory, (rewards * mask).sum(axis=1), minlength=len(offsets) - 1)
    healthy = np.bincount(trajectory, mask.sum(axis=1), minlength=len(offsets) - 1) > 0
    size = len(scores) if config.global_norm else int(config.responses_per_prompt)
    if len(scores) % size:
        raise ValueError(
            f"{len(scores)} trajectories are not blocks of responses_per_prompt={size}"
        )
    blocks = (np.arange(len(scores)) // size)[healthy]
    advantages = np.zeros(len(scores))
    if config.norm_var:
        advantages[healthy] = grpo(scores[healthy], blocks, eps=float(np.finfo(np.float32).eps))
    else:
        advantages[healthy] = dr_grpo(scores[healthy], blocks)
    per_token = advantages[trajectory][:, None] * mask
    tensor_dict["advantages"] = torch.as_tensor(per_token, dtype=torch.float32)


def install_turn_advantages() -> None:
    """Route ``RL2.trainer.ppo.compute_advantages`` through `turn_advantages` when
    ``adv.estimator`` is one of `ESTIMATORS`, and through `reinforce_without_failed` when it
    is RL2's ``reinforce`` and the batch has a failed (infra-error) trajectory (idempotent).
    Other batches go to RL2's own function. Call it in every training process before the
    trainer starts (the recipe does, under torchrun)."""
    from RL2.trainer import ppo

    original = getattr(ppo, "_xpgym_original_compute_advantages", None)
    if original is None:
        original = ppo.compute_advantages
        ppo._xpgym_original_compute_advantages = original

    def compute_advantages(
        config: Any, raw_tensor_dict: dict, cu_seqs: torch.Tensor, step: int
    ) -> None:
        if config.estimator in ESTIMATORS:
            turn_advantages(config, raw_tensor_dict, cu_seqs)
        elif config.estimator == "reinforce" and _has_failed(raw_tensor_dict, cu_seqs):
            reinforce_without_failed(config, raw_tensor_dict, cu_seqs)
        else:
            original(config, raw_tensor_dict, cu_seqs, step)

    ppo.compute_advantages = compute_advantages


def _has_failed(tensor_dict: dict[str, torch.Tensor], cu_seqs: torch.Tensor) -> bool:
    """Whether a trajectory has no action token (`reinforce_without_failed`)."""
    per_row = tensor_dict["action_mask"].detach().cpu().numpy().sum(axis=1)
    offsets = cu_seqs.detach().cpu().numpy()
    return bool((np.add.reduceat(per_row, offsets[:-1]) == 0).any()) if len(per_row) else False


INFRA_ERROR_KEY = "xpgym_infra_error"
"""Key the env module sets in a sample's ``extra_info`` when its episode ended in an
infrastructure failure (``{"kind", "message"}``)."""

METRICS_KEY = "xpgym_metrics"
"""Key the env module sets in a sample's ``extra_info`` when its episode ends: the
episode's own metrics, ``{"metrics/<key>": value}`` (`episode_metrics` of the episode;
``{}`` for none or an infra-error episode)."""


def mask_infra_sample(
    data: dict[str, Any], tensor_dicts: list[dict[str, torch.Tensor]], metric: dict[str, list]
) -> tuple[list[dict[str, torch.Tensor]], dict[str, list]]:
    """Take a sample whose episode ended in an infra error out of the gradient.

    `data`, `tensor_dicts` and `metric` are what RL2 0.0.2's ``Rollout.rollout`` took and
    returned for one sample; when the env module marked ``data["extra_info"]`` with
    `INFRA_ERROR_KEY`, every sequence of the sample gets ``action_mask`` 0 and ``rewards``
    0 (no loss; no turn in `turn_advantages`' statistics). ``metric["infra_error_episodes"]``
    gets 1 for such a sample, else 0, and ``metric["metrics/<key>"]`` each metric the
    sample's episode reported (`METRICS_KEY`), so RL2's mean of each list is the mean over
    the episodes that reported it. Returns the (changed in place) inputs.
    """
    extra_info = data.get("extra_info") or {}
    failed = INFRA_ERROR_KEY in extra_info
    if failed:
        for tensor_dict in tensor_dicts:
            tensor_dict["action_mask"] = torch.zeros_like(tensor_dict["action_mask"])
            tensor_dict["rewards"] = torch.zeros_like(tensor_dict["rewards"])
    metric.setdefault("infra_error_episodes", []).append(int(failed))
    for key, value in (extra_info.get(METRICS_KEY) or {}).items():
        metric.setdefault(key, []).append(float(value))
    return tensor_dicts, metric


def install_infra_masking() -> None:
    """Wrap RL2 0.0.2's ``Rollout.rollout`` with `mask_infra_sample` (idempotent), so an
    episode that failed for infrastructure reasons trains on nothing. Call it in every
    training process before the trainer starts, next to `install_turn_advantages`."""
    from RL2.workers import rollout as rollout_module

    rollout_cls = rollout_module.Rollout
    if getattr(rollout_cls, "_xpgym_original_rollout", None) is not None:
        return
    original = rollout_cls.rollout
    rollout_cls._xpgym_original_rollout = original

    async def rollout(self: Any, data: dict[str, Any], train: bool) -> Any:
        tensor_dicts, metric = await original(self, data, train)
        return mask_infra_sample(data, tensor_dicts, metric)

    rollout_cls.rollout = rollout


# --------------------------------------------------------------------------------------
# Env module (RL2 0.0.2 text API)
# --------------------------------------------------------------------------------------


def make_extra_info(
    task: EpisodeTask,
    *,
    tokenizer: str,
    max_turns: int,
    system_prompt: str | None = None,
) -> dict[str, Any]:
    """A dataset row's ``extra_info`` for the env module (the row has no ``prompt``).

    Args:
        task: The episode to play.
        tokenizer: Name or path of the policy's tokenizer (the model), loaded once with
            ``transformers.AutoTokenizer`` to render observations with its chat template.
        max_turns: RL2's ``rollout.max_turns`` (the env module ends the episode there too:
            the loop-side limit of `xpgym.rollout.recorder.EpisodeRecorder`).
        system_prompt: Prepended to the first observation as a system message.
    """
    return {
        "xpgym_task": task.to_json(),
        "tokenizer": tokenizer,
        "max_turns": max_turns,
        "system_prompt": system_prompt,
    }


_EPISODES = LiveEpisodes(task_env_pool())
"""The episodes between their ``reset`` and their last ``step``; one RL2 dropped (it never
made the last ``step`` call) is reclaimed when its sample's task ends (`LiveEpisodes`)."""
_TOKENIZERS: dict[str, Any] = {}


def _tokenizer(name: str) -> Any:
    if name not in _TOKENIZERS:
        transformers = import_optional(
            "transformers", needed_by="the RL2 env module", install=_INSTALL
        )
        _TOKENIZERS[name] = transformers.AutoTokenizer.from_pretrained(name)
    return _TOKENIZERS[name]


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


async def reset(extra_info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """RL2 0.0.2 ``reset``: start the row's episode; return its first state text.

    The returned ``extra_info`` adds ``xpgym_episode`` (the live episode's key). The
    episode is held by the calling task, RL2's rollout of this sample: if that task ends
    before the episode does, its env goes back to the pool (`LiveEpisodes`).
    """
    task = EpisodeTask.from_json(extra_info["xpgym_task"])
    tokenizer = _tokenizer(extra_info["tokenizer"])
    key = await _EPISODES.start(
        task,
        shared_prompt_builder(tokenizer),
        max_turns=int(extra_info["max_turns"]),
        system_prompt=extra_info.get("system_prompt"),
    )
    return _decode(tokenizer, _EPISODES[key].prompt_ids), {**extra_info, "xpgym_episode": key}


async def step(state_text: str, action_text: str, extra_info: dict[str, Any]) -> dict[str, Any]:
    """RL2 0.0.2 ``step``: play `action_text`; return ``next_state``, ``reward``, ``score``,
    ``done`` and ``extra_info``.

    ``next_state`` is ``state_text + action_text`` followed by the template's end-of-turn
    text the action lacks, the next observation as a message and the generation prompt, so
    RL2 appends only env tokens. The episode ends (``done``) when the env ends it or at
    ``max_turns``; its env is then returned to the pool.
    """
    key = extra_info["xpgym_episode"]
    live = _EPISODES[key]
    tokenizer = live.prompt_builder.tokenizer
    response_ids = tokenizer.encode(action_text, add_special_tokens=False)
    played = len(live.prompt_ids) + len(response_ids)
    done = await _EPISODES.play(key, Generation(text=action_text, token_ids=response_ids))
    episode = live.episode
    if episode.infra_error is not None:  # read by `mask_infra_sample` after RL2's rollout
        extra_info[INFRA_ERROR_KEY] = episode.infra_error.to_dict()
    next_state = ""
    if done:
        extra_info[METRICS_KEY] = episode_metrics([episode])
        logger.debug(
            "RL2 episode of %s (seed %d) ended after %d turns",
            episode.env_id,
            episode.seed,
            len(episode.turns),
        )
    else:
        next_state = state_text + action_text + _decode(tokenizer, live.prompt_ids[played:])
    last = episode.turns[-1]
    return {
        "next_state": next_state,
        "reward": last.reward,
        "score": last.reward,
        "done": done,
        "extra_info": extra_info,
    }


# --------------------------------------------------------------------------------------
# Launch configuration (RL2's ``ppo`` config for the env module)
# --------------------------------------------------------------------------------------

ALGORITHMS: dict[CriticFreeAlgorithm, tuple[str, bool]] = {
    "rebn": ("xpgym_rebn", False),
    "reinforce": ("xpgym_reinforce", False),
    "grpo": ("reinforce", True),
    "dr_grpo": ("reinforce", False),
}
"""Algorithm name -> (``adv.estimator``, ``adv.norm_var``): per-turn ``xpgym_*`` through
`install_turn_advantages`, the group ones through RL2's own trajectory-level ``reinforce``
(``grpo`` with ``norm_var``). RL2 0.0.2 has no RLOO."""


def ppo_overrides(
    *,
    model: str,
    data_path: Path,
    save_dir: Path,
    algorithm: CriticFreeAlgorithm = "rebn",
    gamma: float = 0.9,
    prompts_per_rollout: int = 32,
    responses_per_prompt: int = 1,
    update_per_rollout: int = 2,
    lr: float = 1e-6,
    max_turns: int = 10,
    max_new_tokens: int = 4096,
    max_length_per_device: int = 16384,
    experiment_name: str = "xpgym",
    dynamic_filtering: bool = False,
) -> list[str]:
    """Hydra overrides of RL2's ``ppo`` config that train on `ENV_PATH`'s env module.

    The task rows are read from `data_path` (`write_dataset`); RL2's checkpoints and final
    model go to `save_dir`. Optimiser and sampling follow the GEM paper (no weight decay,
    grad clip 1.0, constant lr without warm-up, clip 0.2, no KL, temperature 1); RL2 samples
    with ``skip_special_tokens=false`` so that the action text it hands the env module keeps
    the end-of-turn token. The estimator comes from `ALGORITHMS`.

    ``dynamic_filtering`` turns on RL2's own filter (``rollout.dynamic_filtering``, training
    rollouts with ``responses_per_prompt > 1``): a prompt's responses are dropped when the
    sums of their rewards are all equal (``std == 0``), DAPO's rule, without drawing new
    prompts in their place (the step trains on fewer).

    Raises:
        ValueError: `algorithm` is not in `ALGORITHMS`.
    """
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {sorted(ALGORITHMS)}, got {algorithm!r}")
    estimator, norm_var = ALGORITHMS[algorithm]
    return [
        f"train_data.path={data_path}",
        f"train_data.prompts_per_rollout={prompts_per_rollout}",
        f"train_data.responses_per_prompt={responses_per_prompt}",
        f"test_data.path={data_path}",
        f"actor.model_name={model}",
        f"actor.max_length_per_device={max_length_per_device}",
        f"actor.lr={lr}",
        "actor.weight_decay=0.0",
        "actor.max_grad_norm=1.0",
        "actor.scheduler=constant",
        "actor.warmup_ratio=0.0",
        "actor.clip=0.2",
        "actor.kl.coef=0.0",
        f"actor.update_per_rollout={update_per_rollout}",
        f"rollout.max_turns={max_turns}",
        f"rollout.env_path={ENV_PATH}",
        f"rollout.dynamic_filtering={str(dynamic_filtering).lower()}",
        "rollout.train_sampling_params.temperature=1.0",
        f"rollout.train_sampling_params.max_new_tokens={max_new_tokens}",
        "+rollout.train_sampling_params.skip_special_tokens=false",
        f"adv.estimator={estimator}",
        f"adv.gamma={gamma}",
        f"adv.norm_var={str(norm_var).lower()}",
        "trainer.project=xpgym",
        f"trainer.experiment_name={experiment_name}",
        f"trainer.save_dir={save_dir}",
        "trainer.use_wandb=false",
    ]


def ppo_config(overrides: Sequence[str]) -> Any:
    """RL2's ``ppo`` config (an ``omegaconf.DictConfig``) with Hydra `overrides` applied,
    composed from RL2's own config directory (RL2 is not imported: no GPU needed)."""
    import importlib.util

    from hydra import compose, initialize_config_dir

    spec = importlib.util.find_spec("RL2")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"cannot find RL2 (rl-square); {_INSTALL}")
    (package_dir,) = spec.submodule_search_locations
    config_dir = Path(package_dir) / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo", overrides=list(overrides))


def write_dataset(
    path: Path, tasks: Sequence[EpisodeTask], *, tokenizer: str, max_turns: int
) -> list[dict[str, Any]]:
    """Write the JSONL task rows RL2's dataloader reads (`ppo_overrides`' `data_path`): one
    row per task with only ``extra_info`` (`make_extra_info`; no ``prompt``: the env module
    resets). Returns the rows."""
    rows = [
        {"extra_info": make_extra_info(task, tokenizer=tokenizer, max_turns=max_turns)}
        for task in tasks
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def train(overrides: Sequence[str]) -> None:
    """In every trainer process (torchrun's): install `install_turn_advantages` and
    `install_infra_masking`, then run RL2's ``main`` on `ppo_config` of `overrides`. RL2's
    ``main`` is called without its ``@hydra.main`` wrapper, which finds the config only when
    RL2 runs as ``python -m RL2.trainer.ppo`` (its config folder is not a package)."""
    from RL2.trainer import ppo

    install_turn_advantages()
    install_infra_masking()
    ppo.main.__wrapped__(ppo_config(overrides))
