"""The warm tiny model every layer starts from.

The CPU demo's tokenizer and model (`xpgym.reference.tiny_model`) for one env, pretrained by
the demo's warm start (`xpgym.reference.warm_start.pretrain`: next-token loss on whole
transcripts of random valid play; a random tiny model never writes a valid answer, so RL
from scratch has no signal). `WarmModelConfig` fixes it; `start_weights` pretrains once and
caches the state dict (layer 2 loads it into fresh models); `warm_model_dir` saves it once per
machine as a ``save_pretrained`` directory (what the trainers load: layer 3, the end-to-end
runs, the benchmark).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "WarmModelConfig",
    "cache_dir",
    "start_weights",
    "tokenizer_and_model",
    "tool_transcripts",
    "warm_model_dir",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmModelConfig:
    """The warm model and its pretraining. Defaults: the CI size.

    Model: `env` (its transcripts make the tokenizer's vocabulary), `model_seed`,
    `hidden_size`, `num_layers`, `num_heads`. Pretraining: `pretrain_steps` x
    `pretrain_episodes` fresh random-play episodes from `num_envs` envs at `pretrain_lr`,
    `threads` torch threads. `pretrain_key` names the weights.

    `tool_calls`: the tool-calling variant (TRL's ``environment_factory`` run): the
    tokenizer chats with tools (``build_tiny_tokenizer(tool_calls=True)``) and the
    transcripts are the random play through `xpgym.adapters.trl.environment_class`'s
    ``act`` tool as TRL renders it (`tool_transcripts`).
    """

    env: str = "game:GuessTheNumber-v0-easy"
    model_seed: int = 0
    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    pretrain_steps: int = 60
    pretrain_episodes: int = 32
    pretrain_lr: float = 2e-3
    num_envs: int = 8
    threads: int = 1
    tool_calls: bool = False

    def pretrain_key(self) -> str:
        """A digest of the fields the start weights depend on (the cache key; the plain
        variant's key does not name `tool_calls`, so it is what it was before the variant)."""
        fields = ("env", "model_seed", "hidden_size", "num_layers", "num_heads")
        fields += ("pretrain_steps", "pretrain_episodes", "pretrain_lr")
        values: dict[str, Any] = {name: getattr(self, name) for name in fields}
        if self.tool_calls:
            values["tool_calls"] = True
        text = json.dumps(values, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def tokenizer_and_model(cfg: WarmModelConfig) -> tuple[Any, Any]:
    """The demo's tokenizer and freshly initialised model (deterministic in `cfg`)."""
    import xpgym
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.reference.warm_start import CORPUS_SEED

    corpus = env_corpus(xpgym.make(cfg.env), episodes=50, seed=CORPUS_SEED)
    if cfg.tool_calls:
        # The tool chats' own pieces (schemas, calls) join the vocabulary: rendered by a
        # first tokenizer over the env's text, kept by the final one.
        first = build_tiny_tokenizer(corpus, max_number=100, tool_calls=True)
        corpus += tool_transcripts(cfg, first, episodes=50, seed=CORPUS_SEED, tokenize=False)
    tokenizer = build_tiny_tokenizer(corpus, max_number=100, tool_calls=cfg.tool_calls)
    model = build_tiny_model(
        tokenizer,
        hidden_size=cfg.hidden_size,
        num_layers=cfg.num_layers,
        num_heads=cfg.num_heads,
        seed=cfg.model_seed,
    )
    return tokenizer, model


def start_weights(cfg: WarmModelConfig, out_dir: Path) -> tuple[Path, bool]:
    """The pretrained weights, as a state-dict file.

    Pretrains with the demo's warm start (`xpgym.reference.warm_start.pretrain`, a random
    valid guesser seeded with ``cfg.model_seed``; with ``cfg.tool_calls``, the same recipe
    on `tool_transcripts`) once and caches the weights as
    ``<out_dir>/start_weights-<key>.pt`` (`WarmModelConfig.pretrain_key`); later calls with
    the same key reuse the file.

    Returns:
        ``(path, cached)``.
    """
    import torch

    path = out_dir / f"start_weights-{cfg.pretrain_key()}.pt"
    if path.exists():
        return path, True
    torch.set_num_threads(cfg.threads)
    tokenizer, model = tokenizer_and_model(cfg)
    if cfg.tool_calls:
        losses = _pretrain_tool_calls(cfg, tokenizer, model)
    else:
        losses = _pretrain_random_play(cfg, tokenizer, model)
    logger.info("pretrained %d steps: NLL %.3f -> %.3f", len(losses), losses[0], losses[-1])
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return path, False


def _pretrain_random_play(cfg: WarmModelConfig, tokenizer: Any, model: Any) -> list[float]:
    """`xpgym.reference.warm_start.pretrain` with a `RandomValidGuesser` seeded with
    ``cfg.model_seed`` over ``cfg.num_envs`` envs."""
    import xpgym
    from xpgym.reference.warm_start import RandomValidGuesser, number_range, pretrain

    guesser = RandomValidGuesser(tokenizer, *number_range(cfg.env), seed=cfg.model_seed)
    vec = xpgym.make_vec(cfg.env, cfg.num_envs)
    try:
        return pretrain(
            model,
            tokenizer,
            vec,
            guesser,
            steps=cfg.pretrain_steps,
            episodes_per_step=cfg.pretrain_episodes,
            lr=cfg.pretrain_lr,
        )
    finally:
        vec.close()


def tool_transcripts(
    cfg: WarmModelConfig, tokenizer: Any, *, episodes: int, seed: int, tokenize: bool = True
) -> list[Any]:
    r"""Random play of ``cfg.env`` as TRL's tool loop renders it: one chat per episode.

    Each episode (reset seed ``seed + k``) is the env's first observation as the user
    message, then per turn an assistant message calling ``act`` with a uniform random
    ``\boxed{n}`` (a ``numpy`` generator seeded with ``(cfg.model_seed, seed)``) and the
    env's reply as a ``tool`` message, until the env ends the episode, then an empty
    assistant message (the model stops calling tools). Rendered with the tools of
    `xpgym.adapters.trl.environment_class` by `tokenizer`'s chat template. The env is never
    in the episode log (``XPGYM_EPISODE_LOG`` is unset while it is made).

    Returns:
        Per episode its token ids (`tokenize`) or its text.
    """
    import asyncio

    import numpy as np

    from parity.shared.environment import set_environment
    from xpgym.adapters.trl import ACTION_TOOL, environment_class
    from xpgym.core.wrappers.episode_log import EPISODE_LOG_VARIABLE
    from xpgym.reference.warm_start import number_range
    from xpgym.rollout.runner import EpisodeTask

    low, high = number_range(cfg.env)
    rng = np.random.default_rng([cfg.model_seed, seed])
    with set_environment({EPISODE_LOG_VARIABLE: None}):  # pretraining is no run's episodes
        environment = environment_class(cfg.env)()
    act = getattr(environment, ACTION_TOOL)
    chats = []
    for k in range(episodes):
        task = EpisodeTask(cfg.env, seed=seed + k, group_id=str(seed + k))
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": environment.reset(task=task.to_json())}
        ]
        while not environment.done:
            action = f"\\boxed{{{int(rng.integers(low, high + 1))}}}"
            call = {
                "type": "function",
                "function": {"name": ACTION_TOOL, "arguments": {"action": action}},
            }
            reply = asyncio.run(act(action=action))
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "name": ACTION_TOOL, "content": reply},
            ]
        messages.append({"role": "assistant", "content": ""})
        chats.append(
            tokenizer.apply_chat_template(
                messages, tools=[act], tokenize=tokenize, return_dict=False
            )
        )
    return chats


def _pretrain_tool_calls(cfg: WarmModelConfig, tokenizer: Any, model: Any) -> list[float]:
    """`xpgym.reference.warm_start.pretrain`'s recipe (`lm_step` on every token of whole
    transcripts, AdamW) on `tool_transcripts`: step ``k`` plays ``cfg.pretrain_episodes``
    fresh episodes seeded from ``PRETRAIN_SEED + k * cfg.pretrain_episodes``."""
    import torch

    from xpgym.reference.warm_start import PRETRAIN_SEED, lm_step

    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.pretrain_lr)
    losses = []
    for step in range(cfg.pretrain_steps):
        rows = tool_transcripts(
            cfg,
            tokenizer,
            episodes=cfg.pretrain_episodes,
            seed=PRETRAIN_SEED + step * cfg.pretrain_episodes,
        )
        width = max(len(row) for row in rows)
        input_ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
        for b, row in enumerate(rows):
            input_ids[b, : len(row)] = torch.tensor(row)
            attention_mask[b, : len(row)] = 1
        losses.append(lm_step(model, optimizer, input_ids, attention_mask))
    return losses


def cache_dir() -> Path:
    """Where warm checkpoints are kept: ``$XPGYM_CACHE`` or ``~/.cache/xpgym``."""
    return Path(os.environ.get("XPGYM_CACHE") or Path.home() / ".cache" / "xpgym")


def _source_digest(cfg: WarmModelConfig) -> str:
    """A digest of the code the warm model depends on (model builder and pretraining; for
    the tool-call variant also its transcripts: this module and the TRL adapter, whose tool
    schemas they render)."""
    import xpgym.reference.tiny_model as tiny_model
    import xpgym.reference.warm_start as warm_start

    files = [Path(module.__file__ or "") for module in (tiny_model, warm_start)]
    if cfg.tool_calls:
        import xpgym.adapters.trl as trl_adapter

        files += [Path(__file__), Path(trl_adapter.__file__ or "")]
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def warm_model_dir(cfg: WarmModelConfig, root: Path | None = None) -> Path:
    """The warm tiny model as a ``save_pretrained`` directory (model and tokenizer).

    Built once per machine from `start_weights` (deterministic in `cfg`) and cached under
    `root` (default `cache_dir`), keyed by `cfg`'s pretraining fields and the source of the
    model builder and the pretraining; later calls with the same key reuse it.
    """
    import torch

    root = root or cache_dir()
    path = root / f"warm-{cfg.pretrain_key()}-{_source_digest(cfg)}"
    if (path / "config.json").exists():
        return path
    weights, _ = start_weights(cfg, root)
    tokenizer, model = tokenizer_and_model(cfg)
    model.load_state_dict(torch.load(weights, weights_only=True))
    partial = path.with_name(path.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    partial.replace(path)  # whole directories only: a crash leaves no half checkpoint
    return path
