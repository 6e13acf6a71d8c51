"""What one end-to-end run of `parity.e2e` is: the start model and the RL settings every
trainer's run takes (each trainer module reads what its loop needs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from parity.shared.warm_model import WarmModelConfig

__all__ = ["E2EConfig"]


@dataclass(frozen=True)
class E2EConfig:
    """One end-to-end run. `warm` fixes the start model (and its cache key); the rest is RL.

    Attributes:
        warm: The tiny model and its pretraining (`parity.shared.warm_model`).
        steps: Optimizer steps.
        tasks_per_step: Distinct tasks per step; each is played `group_size` times (the
            GRPO group: same seed, same start state).
        group_size: Episodes per task.
        lr: Learning rate.
        gamma: Discount over turns (per-turn ReBN).
        max_new_tokens: Token budget per turn.
        max_completion_length: Tokens after the first prompt, env tokens included.
        seed: Task and sampling seed.
        threads: torch threads.
        rollout: The rollout engine, for a trainer whose harness offers a choice
            (`parity.e2e.runs.TrainerRun.rollouts`, e.g. verl's ``hf_cpu`` or ``vllm``);
            None: each trainer's default.
        device: Where the trainer's model runs (``"cpu"``, or ``"cuda"`` for the runs that
            support it: TRL's, `parity.curves.gpu_check`).
    """

    warm: WarmModelConfig = field(default_factory=WarmModelConfig)
    steps: int = 3
    tasks_per_step: int = 2
    group_size: int = 4
    lr: float = 1e-3
    gamma: float = 0.9
    max_new_tokens: int = 6
    max_completion_length: int = 96
    seed: int = 0
    threads: int = 1
    rollout: str | None = None
    device: str = "cpu"
