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

__all__ = ["WarmModelConfig", "cache_dir", "start_weights", "tokenizer_and_model", "warm_model_dir"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WarmModelConfig:
    """The warm model and its pretraining. Defaults: the CI size.

    Model: `env` (its transcripts make the tokenizer's vocabulary), `model_seed`,
    `hidden_size`, `num_layers`, `num_heads`. Pretraining: `pretrain_steps` x
    `pretrain_episodes` fresh random-play episodes from `num_envs` envs at `pretrain_lr`,
    `threads` torch threads. `pretrain_key` names the weights.
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

    def pretrain_key(self) -> str:
        """A digest of the fields the start weights depend on (the cache key)."""
        fields = ("env", "model_seed", "hidden_size", "num_layers", "num_heads")
        fields += ("pretrain_steps", "pretrain_episodes", "pretrain_lr")
        text = json.dumps({name: getattr(self, name) for name in fields}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def tokenizer_and_model(cfg: WarmModelConfig) -> tuple[Any, Any]:
    """The demo's tokenizer and freshly initialised model (deterministic in `cfg`)."""
    import xpgym
    from xpgym.reference.tiny_model import build_tiny_model, build_tiny_tokenizer, env_corpus
    from xpgym.reference.warm_start import CORPUS_SEED

    corpus = env_corpus(xpgym.make(cfg.env), episodes=50, seed=CORPUS_SEED)
    tokenizer = build_tiny_tokenizer(corpus, max_number=100)
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
    valid guesser seeded with ``cfg.model_seed``) once and caches the weights as
    ``<out_dir>/start_weights-<key>.pt`` (`WarmModelConfig.pretrain_key`); later calls with
    the same key reuse the file.

    Returns:
        ``(path, cached)``.
    """
    import torch

    import xpgym
    from xpgym.reference.warm_start import RandomValidGuesser, number_range, pretrain

    path = out_dir / f"start_weights-{cfg.pretrain_key()}.pt"
    if path.exists():
        return path, True
    torch.set_num_threads(cfg.threads)
    tokenizer, model = tokenizer_and_model(cfg)
    guesser = RandomValidGuesser(tokenizer, *number_range(cfg.env), seed=cfg.model_seed)
    vec = xpgym.make_vec(cfg.env, cfg.num_envs)
    try:
        losses = pretrain(
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
    logger.info("pretrained %d steps: NLL %.3f -> %.3f", len(losses), losses[0], losses[-1])
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return path, False


def cache_dir() -> Path:
    """Where warm checkpoints are kept: ``$XPGYM_CACHE`` or ``~/.cache/xpgym``."""
    return Path(os.environ.get("XPGYM_CACHE") or Path.home() / ".cache" / "xpgym")


def _source_digest() -> str:
    """A digest of the code the warm model depends on (model builder and pretraining)."""
    import xpgym.reference.tiny_model as tiny_model
    import xpgym.reference.warm_start as warm_start

    digest = hashlib.sha256()
    for module in (tiny_model, warm_start):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:12]


def warm_model_dir(cfg: WarmModelConfig, root: Path | None = None) -> Path:
    """The warm tiny model as a ``save_pretrained`` directory (model and tokenizer).

    Built once per machine from `start_weights` (deterministic in `cfg`) and cached under
    `root` (default `cache_dir`), keyed by `cfg`'s pretraining fields and the source of the
    model builder and the pretraining; later calls with the same key reuse it.
    """
    import torch

    root = root or cache_dir()
    path = root / f"warm-{cfg.pretrain_key()}-{_source_digest()}"
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
